//! The PostgreSQL engine's modules form floors: an operation's module imports the
//! modules below it (rows, locks, the one write), never one that imports it back. This
//! test reads every `super::<module>` the code of `server/src/pg` names (not its
//! comments; `mod.rs`, which holds the broker every route takes, aside) and checks that
//! the graph has no cycle, and that a push goes one way: route, writers, write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of `server/src/pg` (but `mod.rs`) and the sibling modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pg");
    let files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("server/src/pg")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("readable"))
        })
        .filter(|(name, _)| name != "mod")
        .collect();
    let modules: BTreeSet<String> = files.iter().map(|(n, _)| n.clone()).collect();
    files
        .iter()
        .map(|(name, text)| {
            let code: String = text
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            let named = code
                .split("super::")
                .skip(1)
                .map(|rest| {
                    rest.chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                })
                .map(String::from_iter)
                .filter(|m| modules.contains(m) && m != name)
                .collect();
            (name.clone(), named)
        })
        .collect()
}

/// A module on a cycle, if any (depth-first search, colouring the path).
fn on_a_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == m) {
            return Some(path[at..].to_vec());
        }
        if !done.insert(m.to_string()) {
            return None;
        }
        path.push(m.to_string());
        for next in &g[m] {
            if let Some(cycle) = visit(next, g, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(m, g, &mut Vec::new(), &mut done))
}

#[test]
fn the_engine_modules_import_each_other_in_no_loop() {
    let g = graph();
    assert!(
        g.len() > 10,
        "the engine's modules were found: {:?}",
        g.keys()
    );
    assert_eq!(on_a_cycle(&g), None, "a loop of imports");
}

#[test]
fn a_push_goes_route_then_writers_then_write() {
    let g = graph();
    let names = |m: &str| g[m].iter().map(String::as_str).collect::<Vec<_>>();
    assert!(names("push").contains(&"writers"));
    assert!(names("writers").contains(&"write") && names("writers").contains(&"minted"));
    for below in ["write", "minted"] {
        for above in ["push", "writers"] {
            assert!(!g[below].contains(above), "{below} imports {above}");
        }
    }
    // Transactions and the spool's replay write through the same module.
    assert!(names("txn").contains(&"write"));
    let broker =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/pg/mod.rs"))
            .unwrap();
    assert!(
        broker.contains("write::replay("),
        "the spool replays through write.rs"
    );
}

#[test]
fn a_cycle_is_found_when_there_is_one() {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.insert("a".into(), ["b".to_string()].into());
    g.insert("b".into(), ["c".to_string()].into());
    g.insert("c".into(), ["a".to_string()].into());
    assert_eq!(on_a_cycle(&g).map(|c| c.len()), Some(3));
    g.insert("c".into(), BTreeSet::new());
    assert_eq!(on_a_cycle(&g), None);
}
