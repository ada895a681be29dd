//! Two test binaries running at once must not interfere.
//!
//! cargo runs test binaries one after another, so this test makes the overlap itself: it runs
//! its own binary twice at the same moment (the ignored helper test below), once with local
//! clusters forced (the case with a port race: both pick a free port at the same time) and once
//! with whatever source the environment chooses (a container each under Docker). Each child
//! writes its own row into a table of the same name and must read back only that row.

use std::process::{Command, Output, Stdio};

use sqlx::{Connection, PgConnection};

const CHILD_ENV: &str = "QUEEN_PG_PARALLEL_CHILD";

fn run_pair(forced: Option<&str>) -> [String; 2] {
    let exe = std::env::current_exe().expect("test binary path");
    let children: Vec<_> = (0..2)
        .map(|i| {
            let mut cmd = Command::new(&exe);
            cmd.args([
                "--exact",
                "child_uses_its_own_database",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_ENV, i.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
            if let Some(source) = forced {
                cmd.env("QUEEN_TEST_PG", source);
            }
            cmd.spawn().expect("spawn child test binary")
        })
        .collect();
    let outputs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("child output"))
        .collect();
    let mut reports = Vec::new();
    for (i, out) in outputs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "child {i} failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        let report = stdout
            .lines()
            .find(|l| l.starts_with("CHILD "))
            .unwrap_or_else(|| panic!("child {i} printed no report:\n{stdout}\n{stderr}"))
            .to_owned();
        eprintln!("  {report}");
        reports.push(report);
    }
    [reports[0].clone(), reports[1].clone()]
}

fn field<'a>(report: &'a str, key: &str) -> &'a str {
    report
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|w| w.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key} in {report:?}"))
}

#[test]
fn two_processes_at_once_do_not_interfere() {
    if queen_pg::local_binaries().is_ok() {
        eprintln!("[parallel] two processes, each with its own local cluster:");
        let [a, b] = run_pair(Some("local"));
        assert_ne!(
            field(&a, "server"),
            field(&b, "server"),
            "each has its own cluster"
        );
    } else {
        eprintln!("[parallel] local variant SKIPPED: no local PostgreSQL binaries");
    }
    if queen_pg::forced_source().ok().flatten() != Some(queen_pg::Source::Local) {
        eprintln!("[parallel] two processes with the environment's source:");
        let [a, b] = run_pair(None);
        assert_ne!(field(&a, "db"), field(&b, "db"));
        if field(&a, "source") != "url" {
            assert_ne!(field(&a, "server"), field(&b, "server"));
        }
    }
}

#[tokio::test]
#[ignore = "helper process for two_processes_at_once_do_not_interfere"]
async fn child_uses_its_own_database() {
    let id = std::env::var(CHILD_ENV).expect("run by two_processes_at_once_do_not_interfere");
    let server = queen_pg::shared().await.expect("a PostgreSQL source");
    let db = server.test_db().await.expect("test database");
    let mut conn = PgConnection::connect(db.url()).await.expect("connect");
    sqlx::raw_sql("CREATE TABLE same_name (who TEXT NOT NULL)")
        .execute(&mut conn)
        .await
        .expect("create table");
    for _ in 0..20 {
        sqlx::query("INSERT INTO same_name VALUES ($1)")
            .bind(&id)
            .execute(&mut conn)
            .await
            .expect("insert");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let rows: Vec<(String,)> = sqlx::query_as("SELECT who FROM same_name")
        .fetch_all(&mut conn)
        .await
        .expect("select");
    assert_eq!(rows.len(), 20);
    assert!(rows.iter().all(|(who,)| *who == id), "only our own rows");
    conn.close().await.expect("close");
    let port = server
        .admin_url()
        .rsplit_once(':')
        .map_or("?", |(_, rest)| rest.split('/').next().unwrap_or("?"));
    println!(
        "CHILD id={id} source={} server=port:{port} db={}",
        server.source(),
        db.name()
    );
}
