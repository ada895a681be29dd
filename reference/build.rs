//! The version of the spec the model implements, read from `spec/PROTOCOL.md` (its
//! `Spec version **X.Y.Z**` line), so the model, the OpenAPI document and the reports
//! all name the same one. The crate reads it through `PROTOCOL.md`, a link to that file
//! that packaging turns into a copy, so a packaged crate carries the spec it checks.

fn main() {
    let spec = "PROTOCOL.md";
    println!("cargo:rerun-if-changed={spec}");
    let text = std::fs::read_to_string(spec).expect("spec/PROTOCOL.md is in the repository");
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("Spec version **"))
        .and_then(|rest| rest.split("**").next())
        .expect("spec/PROTOCOL.md names its version as `Spec version **X.Y.Z**`");
    println!("cargo:rustc-env=QUEEN_SPEC_VERSION={version}");
}
