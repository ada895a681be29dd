//! The model never reads a clock (PROTOCOL.md section 13: time is an input). The one
//! reader of the wall clock, `time::wall_clock_ms`, is for what feeds the model; no file
//! of `model/` or `checker/`, nor the engine, names it or `SystemTime`.

use std::path::Path;

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_model_and_the_checker_never_read_the_clock() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for dir in ["model", "checker"] {
        files(&src.join(dir), &mut found);
    }
    found.push(src.join("engine.rs"));
    assert!(
        found.len() > 20,
        "the model's files were found: {}",
        found.len()
    );
    for f in found {
        let text = std::fs::read_to_string(&f).unwrap();
        for clock in ["wall_clock_ms", "SystemTime", "Instant::now"] {
            assert!(
                !text.contains(clock),
                "{} reads the clock ({clock})",
                f.display()
            );
        }
    }
}
