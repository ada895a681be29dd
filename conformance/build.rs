//! Stamps the binary with what a CI job needs to say "conformant to spec X with suite
//! Y": the version of the embedded spec (read from `spec/PROTOCOL.md`) and the git
//! revision the suite was built from (`unknown` outside a git checkout).

use std::process::Command;

fn main() {
    let spec = "../spec/PROTOCOL.md";
    println!("cargo:rerun-if-changed={spec}");
    let text = std::fs::read_to_string(spec).expect("spec/PROTOCOL.md is in the repository");
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("Spec version **"))
        .and_then(|rest| rest.split("**").next())
        .expect("spec/PROTOCOL.md names its version as `Spec version **X.Y.Z**`");
    println!("cargo:rustc-env=QUEEN_SPEC_VERSION={version}");

    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let rev = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=QUEEN_GIT_REVISION={rev}");
    // A commit moves HEAD's branch: watch where refs live.
    for path in ["HEAD", "refs/heads", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
