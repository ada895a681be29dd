//! Running the mutants: a copy of the function folder per mutant, a fresh database, our
//! server started on both, the suite against it, and one verdict per mutant.

use crate::mutants::{mutants, Mutant};
use crate::Args;
use queen_conformance::launch::{free_port, url, wait_healthy, Launch, ServerProgram};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What became of one mutant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// The suite failed: some case saw the change.
    Killed,
    /// The suite passed.
    Survived,
    /// PostgreSQL would not create the functions, so the server did not start.
    Unviable,
    /// The suite did not finish in time (a hang counts as seen, but is listed apart).
    Timeout,
    /// The suite passed and the server's own tests failed.
    KilledByServerTests,
}

impl Verdict {
    fn name(self) -> &'static str {
        match self {
            Verdict::Killed => "killed",
            Verdict::Survived => "survived",
            Verdict::Unviable => "unviable",
            Verdict::Timeout => "timeout",
            Verdict::KilledByServerTests => "killed by server tests",
        }
    }
}

/// Every mutant of the folder's files, in file order, filtered by the arguments.
fn all_mutants(args: &Args) -> Result<Vec<(Mutant, String)>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(&args.sql)
        .map_err(|e| format!("{}: {e}", args.sql.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if !args.file.is_empty() && !args.file.contains(&name) {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        for m in mutants(&name, &text) {
            if args.operator.is_empty() || args.operator.iter().any(|o| o == m.operator) {
                out.push((m, text.clone()));
            }
        }
    }
    Ok(out)
}

/// `n` of `all`, chosen by `seed` and kept in file order.
fn sample<T>(mut all: Vec<T>, n: usize, seed: u64) -> Vec<T> {
    let mut state = seed;
    let mut next = || {
        // splitmix64: a seeded, repeatable choice without a dependency.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut keys: Vec<(u64, usize)> = (0..all.len()).map(|i| (next(), i)).collect();
    keys.sort();
    let mut chosen: Vec<usize> = keys.into_iter().take(n).map(|(_, i)| i).collect();
    chosen.sort_unstable();
    let mut out = Vec::with_capacity(chosen.len());
    for i in chosen.into_iter().rev() {
        out.push(all.swap_remove(i));
    }
    out.reverse();
    out
}

/// The verdict `results.jsonl` at `path` records for each mutant (the last one wins);
/// none when there is no such file yet.
fn recorded(path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| Some((v["mutant"].as_str()?.into(), v["verdict"].as_str()?.into())))
        .collect())
}

/// The mutants an earlier run's `results.jsonl` says survived.
fn survivors_of(path: &Path) -> Result<BTreeSet<String>, String> {
    Ok(recorded(path)?
        .into_iter()
        .filter(|(_, v)| v == "survived")
        .map(|(m, _)| m)
        .collect())
}

/// `--summary`: the table of what `--out` records for today's selection.
fn summary(chosen: &[(Mutant, String)], done: &BTreeMap<String, String>) {
    let mut counts = BTreeMap::new();
    let mut open = 0;
    for (m, text) in chosen {
        match done
            .get(&m.describe(text))
            .and_then(|v| VERDICTS.iter().find(|x| *x == v))
        {
            Some(v) => *counts.entry((m.file.clone(), *v)).or_default() += 1,
            None => open += 1,
        }
    }
    print_table(&counts);
    println!(
        "{} of {} mutants have a verdict; {open} have none yet",
        chosen.len() - open,
        chosen.len()
    );
}

fn beside_me(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    Ok(exe.with_file_name(name))
}

/// Runs the selected mutants; the number that survived.
pub async fn main(args: Args) -> Result<usize, String> {
    let mut chosen = all_mutants(&args)?;
    // An earlier run's survivors are a selection already: a sample on top of them would
    // be drawn from today's list of mutants and could miss some.
    if let Some(path) = &args.survivors_of {
        let kept = survivors_of(path)?;
        chosen.retain(|(m, text)| kept.contains(&m.describe(text)));
    } else if let Some(n) = args.sample {
        chosen = sample(chosen, n, args.seed);
    }
    let results_path = args.out.join("results.jsonl");
    let done = if args.resume || args.summary {
        recorded(&results_path)?
    } else {
        BTreeMap::new()
    };
    if args.summary {
        summary(&chosen, &done);
        return Ok(0);
    }
    if args.list {
        for (m, text) in &chosen {
            println!("{}", m.describe(text));
        }
        println!("{} mutants", chosen.len());
        return Ok(0);
    }
    if let Some(to) = &args.write_to {
        for (i, (m, text)) in chosen.iter().enumerate() {
            let dir = to.join(format!("{:03}", i + 1));
            write_folder(args.sql.as_path(), &dir, m, text)?;
            std::fs::write(dir.join("MUTANT"), format!("{}\n", m.describe(text)))
                .map_err(|e| e.to_string())?;
            println!("{} {}", dir.display(), m.describe(text));
        }
        return Ok(0);
    }
    let server = ServerProgram::binary(
        args.server
            .clone()
            .map_or_else(|| beside_me("queen-server"), Ok)?,
    );
    let suite = args
        .conformance
        .clone()
        .map_or_else(|| beside_me("queen-conformance"), Ok)?;
    std::fs::create_dir_all(args.out.join("logs")).map_err(|e| e.to_string())?;
    let append = args.from > 1 || args.resume;
    let mut results = std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(!append)
        .truncate(!append)
        .open(&results_path)
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let mut counts = BTreeMap::<(String, &str), usize>::new();
    let mut survivors = Vec::new();
    for (i, (m, text)) in chosen.iter().enumerate() {
        let name = m.describe(text);
        if i + 1 < args.from || done.contains_key(&name) {
            continue;
        }
        let t = Instant::now();
        let verdict = one(&args, &server, &suite, i, m, text).await?;
        let line = json!({"file": m.file, "function": m.function, "line": m.line,
            "column": m.column(text), "operator": m.operator, "mutant": name,
            "verdict": verdict.name(), "seconds": t.elapsed().as_secs_f64()});
        writeln!(results, "{line}").map_err(|e| e.to_string())?;
        println!("[{}/{}] {:8} {name}", i + 1, chosen.len(), verdict.name());
        *counts.entry((m.file.clone(), verdict.name())).or_default() += 1;
        if verdict == Verdict::Survived {
            survivors.push(name);
        }
    }
    print_table(&counts);
    println!(
        "{} survived; {:.0} s in all",
        survivors.len(),
        started.elapsed().as_secs_f64()
    );
    for s in &survivors {
        println!("  survived: {s}");
    }
    Ok(survivors.len())
}

/// One mutant: its folder, database, server and suite run.
async fn one(
    args: &Args,
    server: &ServerProgram,
    suite: &Path,
    i: usize,
    m: &Mutant,
    text: &str,
) -> Result<Verdict, String> {
    let dir = args.out.join(format!("mutant-{i}"));
    write_folder(&args.sql, &dir, m, text)?;
    std::fs::create_dir_all(dir.join("spool")).map_err(|e| e.to_string())?;
    let db = queen_pg::TestDb::new()
        .await
        .map_err(|e| format!("a database: {e}"))?;
    let port = free_port()?;
    let log = args.out.join("logs").join(format!("mutant-{i}.log"));
    let mut child = server.spawn(&Launch {
        port,
        database_url: db.url().to_string(),
        spool_dir: dir.join("spool"),
        pool_size: 8,
        rust_log: "warn".into(),
        env: vec![(
            queen_server::pg::SQL_OVERRIDE_ENV.to_string(),
            std::fs::canonicalize(&dir)
                .map_err(|e| e.to_string())?
                .display()
                .to_string(),
        )],
        log: Some(log.clone()),
        dir: None,
    })?;
    let http = reqwest::Client::new();
    let target = url(port);
    let verdict =
        match wait_healthy(&http, &target, Some(&mut child), Duration::from_secs(30)).await {
            Err(_) => Verdict::Unviable,
            Ok(()) => run_suite(args, suite, &target, &log).await?,
        };
    let _ = child.kill();
    let _ = child.wait();
    let _ = db.close().await;
    let verdict = match verdict {
        Verdict::Survived if !args.server_tests.is_empty() => {
            server_tests(args, &dir, &log).await?
        }
        v => v,
    };
    let _ = std::fs::remove_dir_all(&dir);
    Ok(verdict)
}

/// `dir`, made afresh: the function files of `sql`, with `m` applied to its own.
fn write_folder(sql: &Path, dir: &Path, m: &Mutant, text: &str) -> Result<(), String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    for e in std::fs::read_dir(sql).map_err(|e| e.to_string())? {
        let p = e.map_err(|e| e.to_string())?.path();
        if p.extension().is_some_and(|x| x == "sql") {
            std::fs::copy(&p, dir.join(p.file_name().unwrap_or_default()))
                .map_err(|e| e.to_string())?;
        }
    }
    std::fs::write(dir.join(&m.file), m.apply(text)).map_err(|e| e.to_string())
}

/// The server's own PostgreSQL tests on a mutant the suite missed: they read the tables,
/// which the wire cannot show (a payload stored in clear, a row left behind).
async fn server_tests(args: &Args, dir: &Path, log: &Path) -> Result<Verdict, String> {
    let out = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new("cargo");
    cmd.args(["test", "-q", "-p", "queen-server"]);
    for t in &args.server_tests {
        cmd.args(["--test", t]);
    }
    let dir = std::fs::canonicalize(dir).map_err(|e| e.to_string())?;
    cmd.env(queen_server::pg::SQL_OVERRIDE_ENV, dir)
        .stdout(out.try_clone().map_err(|e| e.to_string())?)
        .stderr(out)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("cargo test: {e}"))?;
    let within = Duration::from_secs(args.timeout_secs * 3);
    match tokio::time::timeout(within, child.wait()).await {
        Err(_) => Ok(Verdict::Timeout),
        Ok(Ok(s)) if s.success() => Ok(Verdict::Survived),
        Ok(Ok(_)) => Ok(Verdict::KilledByServerTests),
        Ok(Err(e)) => Err(e.to_string()),
    }
}

/// The suite against `target`, strict, its output appended to `log`.
async fn run_suite(args: &Args, suite: &Path, target: &str, log: &Path) -> Result<Verdict, String> {
    let out = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new(suite);
    cmd.args([
        "run",
        "--target",
        target,
        "--strict",
        "--without",
        "database-control",
    ])
    .args(["--concurrency", &args.concurrency.to_string()])
    .args(["--seed", &args.seed.to_string()])
    // A verdict needs a failure, not its shortest form.
    .args(["--shrink-secs", "5"])
    .stdout(out.try_clone().map_err(|e| e.to_string())?)
    .stderr(out)
    .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{}: {e}", suite.display()))?;
    match tokio::time::timeout(Duration::from_secs(args.timeout_secs), child.wait()).await {
        Err(_) => Ok(Verdict::Timeout),
        Ok(Ok(s)) if s.code() == Some(0) => Ok(Verdict::Survived),
        // 2: the suite found no Queen broker there (a push answered 500, say); 3: the
        // broker stopped answering during the run (a query that never ends holds the pool).
        Ok(Ok(s)) if matches!(s.code(), Some(1..=3)) => Ok(Verdict::Killed),
        Ok(Ok(s)) => Err(format!("the suite ended with {s}: see {}", log.display())),
        Ok(Err(e)) => Err(e.to_string()),
    }
}

/// Every verdict's name, in the table's column order.
const VERDICTS: [&str; 5] = [
    "killed",
    "killed by server tests",
    "survived",
    "timeout",
    "unviable",
];

/// Mutants per file: how many, and each verdict.
fn print_table(counts: &BTreeMap<(String, &str), usize>) {
    let mut table = comfy_table::Table::new();
    let mut header = vec!["file", "mutants"];
    header.extend(VERDICTS);
    table.set_header(header);
    let files: BTreeSet<&String> = counts.keys().map(|(f, _)| f).collect();
    for f in files {
        let n = |v: &str| counts.get(&(f.clone(), v)).copied().unwrap_or(0);
        let all = VERDICTS.iter().map(|v| n(v)).sum::<usize>();
        let mut row = vec![f.clone(), all.to_string()];
        row.extend(VERDICTS.iter().map(|v| n(v).to_string()));
        table.add_row(row);
    }
    println!("{table}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mutants_folder_holds_every_function_file_with_only_its_own_changed() {
        let root = std::env::temp_dir().join(format!("sql-mutants-{}", std::process::id()));
        let (sql, dir) = (root.join("sql"), root.join("001"));
        std::fs::create_dir_all(&sql).unwrap();
        let text = "SELECT 1 WHERE a < b;\n";
        std::fs::write(sql.join("01_a.sql"), text).unwrap();
        std::fs::write(sql.join("02_b.sql"), "SELECT 2;\n").unwrap();
        let m = crate::mutants::mutants("01_a.sql", text)
            .into_iter()
            .find(|m| m.operator == "comparison")
            .expect("a comparison mutant");
        write_folder(&sql, &dir, &m, text).unwrap();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        assert_eq!(read("01_a.sql"), m.apply(text));
        assert_ne!(read("01_a.sql"), text);
        assert_eq!(read("02_b.sql"), "SELECT 2;\n");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_sample_is_repeatable_in_order_and_of_its_size() {
        let all: Vec<u32> = (0..100).collect();
        let a = sample(all.clone(), 10, 7);
        assert_eq!(a, sample(all.clone(), 10, 7));
        assert_eq!(a.len(), 10);
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        assert_ne!(a, sample(all.clone(), 10, 8));
        assert_eq!(sample(all, 200, 1).len(), 100);
    }
}
