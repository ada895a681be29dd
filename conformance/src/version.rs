//! What a report says it was checked against: the suite's version, the git revision it
//! was built from, and the version of the spec it embeds, so a CI job can state
//! "conformant to spec X with suite Y at revision Z" and a diff between two runs can be
//! told apart from a change of the suite.
//!
//! The policy (`docs/broker-authors.md`, "Versions"): the suite's major and minor are
//! those of the spec it checks, and its patch counts the suite's own releases for that
//! spec; so `queen-conformance 1.12.x` checks spec 1.12, and a pin on one says which
//! rules a broker was held to.

/// The version of the suite (the crate's).
pub const SUITE: &str = env!("CARGO_PKG_VERSION");

/// The git revision the suite was built from (`unknown` outside a git checkout).
pub const GIT_REVISION: &str = env!("QUEEN_GIT_REVISION");

/// The version of the spec the suite checks (`spec/PROTOCOL.md`, embedded).
pub const SPEC: &str = queen_reference::SPEC_VERSION;

/// The spec itself, as the suite was built with it.
pub(crate) const SPEC_TEXT: &str = queen_reference::SPEC_TEXT;

/// `--version`: all three.
pub(crate) static LONG: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("{SUITE} (revision {GIT_REVISION}, spec {SPEC})"));

/// One line for the head of a report: what `--version` prints, named.
pub fn line() -> String {
    format!("queen-conformance {}", *LONG)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_version_is_the_one_the_embedded_spec_names() {
        assert!(SPEC_TEXT.contains(&format!("Spec version **{SPEC}**")));
        assert_eq!(SPEC.split('.').count(), 3, "{SPEC}");
        // The changelog has an entry for it.
        let changelog = SPEC_TEXT.split("## Changelog").nth(1).expect("a changelog");
        assert!(changelog.contains(SPEC), "no changelog entry for {SPEC}");
        assert!(!GIT_REVISION.is_empty());
    }

    #[test]
    fn the_suite_version_is_the_spec_version_it_checks() {
        let major_minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
        assert_eq!(
            major_minor(SUITE),
            major_minor(SPEC),
            "suite {SUITE}, spec {SPEC}"
        );
    }
}
