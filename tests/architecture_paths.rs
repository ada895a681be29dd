//! `ARCHITECTURE.md` is the map a newcomer reads first, so every file or folder it names
//! exists. A name in backticks that ends like a file (`.rs`, `.sql`, `.md`, ...) or a
//! folder (`/`) must be a path of the repository, or the tail of one (`pg/write.rs` is
//! `server/src/pg/write.rs`); globs, placeholders and routes (`/openapi.json`) are not.

use std::path::Path;

/// Every file and folder of the repository, relative to its root, folders ending in `/`.
fn repository_paths(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if ["target", ".git", "node_modules"].contains(&name.as_str()) {
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                out.push(format!("{rel}/"));
                stack.push(path);
            } else {
                out.push(rel);
            }
        }
    }
    out
}

/// The names in backticks of `text` that look like a file or a folder.
fn named_paths(text: &str) -> Vec<&str> {
    const ENDINGS: [&str; 12] = [
        ".rs", ".sql", ".md", ".toml", ".sh", ".json", ".py", ".yml", ".yaml", ".svg", ".txt", "/",
    ];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| !t.contains(char::is_whitespace) && !t.contains(['*', '{', '<', '$']))
        .filter(|t| !t.starts_with('/'))
        .filter(|t| ENDINGS.iter().any(|e| t.ends_with(e)) && t.len() > 1)
        .collect()
}

fn exists(name: &str, paths: &[String]) -> bool {
    let name = name.trim_start_matches("./");
    paths
        .iter()
        .any(|p| p == name || p.ends_with(&format!("/{name}")))
}

#[test]
fn every_path_the_architecture_map_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let paths = repository_paths(root);
    let named = named_paths(&map);
    assert!(
        named.len() > 50,
        "the map names its files ({} found)",
        named.len()
    );
    let missing: Vec<&str> = named.into_iter().filter(|n| !exists(n, &paths)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn a_renamed_file_is_caught() {
    let paths = vec![
        "server/src/pg/write.rs".to_string(),
        "server/sql/".to_string(),
    ];
    assert!(exists("pg/write.rs", &paths) && exists("write.rs", &paths));
    assert!(exists("server/sql/", &paths));
    assert!(!exists("pg/group.rs", &paths) && !exists("rite.rs", &paths));
    assert_eq!(
        named_paths("`pg/write.rs` and `a b.rs`, `server/sql/*.sql`, `/openapi.json`, `Request`"),
        ["pg/write.rs"]
    );
}
