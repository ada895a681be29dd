//! The workspace's `rust-version` is true: no dependency that `Cargo.lock` pins declares
//! a newer one. Each locked registry package's manifest is read from cargo's registry
//! sources (where the build unpacked it); a package this platform never unpacked, a
//! Windows-only crate say, is not built here and is skipped.

use std::path::{Path, PathBuf};

/// `major.minor` of a version string.
fn minor(v: &str) -> (u32, u32) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

/// The first `rust-version = "..."` of a manifest's text.
fn rust_version(manifest: &str) -> Option<String> {
    manifest.lines().find_map(|l| {
        let v = l
            .trim()
            .strip_prefix("rust-version")?
            .trim()
            .strip_prefix('=')?;
        Some(v.trim().trim_matches('"').to_string())
    })
}

/// The unpacked registry sources: `$CARGO_HOME/registry/src/*`.
fn registry_dirs() -> Vec<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .expect("a cargo home");
    std::fs::read_dir(home.join("registry/src"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn no_locked_dependency_needs_a_newer_rust_than_the_workspace_declares() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ours = rust_version(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap())
        .expect("the workspace declares a rust-version");
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap();
    let dirs = registry_dirs();
    let (mut read, mut newest) = (0, ((0, 0), String::new()));
    for block in lock.split("[[package]]").skip(1) {
        let field = |k: &str| {
            block.lines().find_map(|l| {
                Some(
                    l.strip_prefix(k)?
                        .trim()
                        .strip_prefix('=')?
                        .trim()
                        .trim_matches('"')
                        .to_string(),
                )
            })
        };
        let (Some(name), Some(version), Some(_)) =
            (field("name "), field("version "), field("source "))
        else {
            continue;
        };
        let Some(text) = dirs.iter().find_map(|d| {
            std::fs::read_to_string(d.join(format!("{name}-{version}/Cargo.toml"))).ok()
        }) else {
            continue;
        };
        read += 1;
        if let Some(v) = rust_version(&text) {
            if minor(&v) > newest.0 {
                newest = (minor(&v), format!("{name} {version} (rust-version {v})"));
            }
        }
    }
    assert!(
        read > 50,
        "the locked dependencies' manifests were found ({read} read)"
    );
    assert!(
        newest.0 <= minor(&ours),
        "{} needs a newer Rust than the workspace's rust-version {ours}",
        newest.1
    );
    assert_eq!(
        newest.0,
        minor(&ours),
        "the workspace's rust-version {ours} is newer than the newest any dependency needs, {}",
        newest.1
    );
}
