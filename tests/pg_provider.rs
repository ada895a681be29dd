//! The PostgreSQL provider (queen-pg), proven source by source.
//!
//! Each source test starts PostgreSQL through the provider, creates a table, writes a row and
//! reads it back, and prints which source ran. The Docker test is skipped with a printed reason
//! when no engine answers, and the URL test when DATABASE_URL is unset, unless QUEEN_TEST_PG
//! forces that source (then failing is right).

use queen_pg::{PersistentCluster, Server, Source, TestDb};
use sqlx::{Connection, PgConnection};

/// Create a table, write a row, read it back.
async fn round_trip(url: &str, marker: &str) {
    let mut conn = PgConnection::connect(url).await.expect("connect");
    sqlx::raw_sql("CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL)")
        .execute(&mut conn)
        .await
        .expect("create table");
    sqlx::query("INSERT INTO notes (body) VALUES ($1)")
        .bind(marker)
        .execute(&mut conn)
        .await
        .expect("insert");
    let rows: Vec<(i64, String)> = sqlx::query_as("SELECT id, body FROM notes ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .expect("select");
    assert_eq!(rows, vec![(1, marker.to_owned())]);
    conn.close().await.expect("close");
}

fn forced(source: Source) -> bool {
    queen_pg::forced_source().expect("QUEEN_TEST_PG") == Some(source)
}

/// `Some(reason)` when QUEEN_TEST_PG forces a source other than `source`.
fn forced_elsewhere(source: Source) -> Option<String> {
    match queen_pg::forced_source().expect("QUEEN_TEST_PG") {
        Some(other) if other != source => {
            Some(format!("QUEEN_TEST_PG={other} forces another source"))
        }
        _ => None,
    }
}

async fn prove(source: Source) {
    let server = queen_pg::server(source)
        .await
        .unwrap_or_else(|e| panic!("{source} source failed: {e}"));
    eprintln!("[{source}] PostgreSQL from {}", server.describe());
    let db = server.test_db().await.expect("test database");
    round_trip(db.url(), &format!("via {source}")).await;
    eprintln!("[{source}] table written and read back in {}", db.name());
    db.close().await.expect("drop test database");
}

#[tokio::test]
async fn url_source_from_database_url() {
    if let Some(why) = forced_elsewhere(Source::Url) {
        eprintln!("[url] SKIPPED: {why}");
        return;
    }
    if queen_pg::database_url().is_none() && !forced(Source::Url) {
        eprintln!("[url] SKIPPED: DATABASE_URL is not set");
        return;
    }
    prove(Source::Url).await;
}

#[tokio::test]
async fn docker_source() {
    if let Some(why) = forced_elsewhere(Source::Docker) {
        eprintln!("[docker] SKIPPED: {why}");
        return;
    }
    if !forced(Source::Docker) {
        if let Err(why) = queen_pg::docker_engine_answers().await {
            eprintln!("[docker] SKIPPED: {why}");
            return;
        }
    }
    eprintln!("[docker] image {}", queen_pg::docker_image());
    prove(Source::Docker).await;
}

#[tokio::test]
async fn local_source() {
    if let Some(why) = forced_elsewhere(Source::Local) {
        eprintln!("[local] SKIPPED: {why}");
        return;
    }
    if !forced(Source::Local) {
        if let Err(why) = queen_pg::local_binaries() {
            eprintln!("[local] SKIPPED: {why}");
            return;
        }
    }
    prove(Source::Local).await;
}

/// The URL code path without DATABASE_URL: point it at the local cluster's URL.
#[tokio::test]
async fn url_code_path_against_a_local_cluster() {
    if let Some(why) = forced_elsewhere(Source::Local) {
        eprintln!("[url via local] SKIPPED: {why}");
        return;
    }
    if queen_pg::local_binaries().is_err() && !forced(Source::Local) {
        eprintln!("[url via local] SKIPPED: no local PostgreSQL binaries");
        return;
    }
    let local = queen_pg::server(Source::Local)
        .await
        .expect("local cluster");
    let server = Server::from_url(local.admin_url())
        .await
        .expect("URL source");
    assert_eq!(server.source(), Source::Url);
    let db = server.test_db().await.expect("test database");
    round_trip(db.url(), "via url").await;
    eprintln!("[url via local] round trip on {}", db.name());
}

/// Tests on the shared server get separate databases: same table name, different rows.
#[tokio::test]
async fn test_databases_are_isolated() {
    let (a, b) = tokio::join!(TestDb::new(), TestDb::new());
    let (a, b) = (a.expect("first TestDb"), b.expect("second TestDb"));
    eprintln!(
        "[shared] source {}: {} and {}",
        a.source(),
        a.name(),
        b.name()
    );
    assert_ne!(a.name(), b.name());
    tokio::join!(round_trip(a.url(), "a"), round_trip(b.url(), "b"));

    let name = a.name().to_owned();
    let admin = queen_pg::shared().await.unwrap().admin_url().to_owned();
    a.close().await.expect("drop");
    let mut conn = PgConnection::connect(&admin).await.unwrap();
    let left: Option<(String,)> =
        sqlx::query_as("SELECT datname::text FROM pg_database WHERE datname = $1")
            .bind(&name)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
    assert_eq!(left, None, "closed TestDb's database must be gone");
    let b_name = b.name().to_owned();
    drop(b); // dropped synchronously, also from inside a runtime
    let b_left: Option<(String,)> =
        sqlx::query_as("SELECT datname::text FROM pg_database WHERE datname = $1")
            .bind(&b_name)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
    assert_eq!(b_left, None, "dropped TestDb's database must be gone");
    conn.close().await.unwrap();
}

/// The embedded server's cluster: initdb once, data kept across restarts.
#[tokio::test]
async fn persistent_cluster_survives_restart() {
    if queen_pg::local_binaries().is_err() && !forced(Source::Local) {
        eprintln!("[persistent] SKIPPED: no local PostgreSQL binaries");
        return;
    }
    let parent = std::env::temp_dir().join(format!("queen-persistent-test-{}", std::process::id()));
    let dir = parent.join(".queen/postgres");
    let _ = std::fs::remove_dir_all(&parent);

    let first = PersistentCluster::start(&dir, 0)
        .await
        .expect("first start");
    assert!(first.initialised(), "a new directory is initialised");
    eprintln!(
        "[persistent] started in {} on port {}",
        first.data_dir().display(),
        first.port()
    );
    round_trip(first.url(), "kept").await;
    first.shutdown().expect("shutdown");

    let second = PersistentCluster::start(&dir, 0)
        .await
        .expect("second start");
    assert!(
        !second.initialised(),
        "an existing cluster is not initialised again"
    );
    let mut conn = PgConnection::connect(second.url()).await.unwrap();
    let body: (String,) = sqlx::query_as("SELECT body FROM notes")
        .fetch_one(&mut conn)
        .await
        .expect("row survived the restart");
    assert_eq!(body.0, "kept");
    conn.close().await.unwrap();
    drop(second);
    std::fs::remove_dir_all(&parent).unwrap();
}

/// A synchronous standby holds every commit the primary reported, and takes over when
/// promoted (the failover fault scenarios stand on this).
#[tokio::test]
async fn synchronous_standby_holds_the_primarys_commits_after_promotion() {
    if queen_pg::local_binaries().is_err() && !forced(Source::Local) {
        eprintln!("[standby] SKIPPED: no local PostgreSQL binaries");
        return;
    }
    let parent = std::env::temp_dir().join(format!("queen-standby-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&parent);
    let primary = PersistentCluster::start(parent.join("primary"), 0)
        .await
        .expect("primary");
    let standby = primary
        .start_standby(
            parent.join("standby"),
            0,
            queen_pg::Replication::Synchronous,
        )
        .await
        .expect("standby");
    assert!(
        standby.in_recovery().await.unwrap(),
        "a standby is in recovery"
    );
    round_trip(primary.url(), "replicated").await;
    drop(primary);
    standby.promote().await.expect("promotion");
    assert!(!standby.in_recovery().await.unwrap());
    let mut conn = PgConnection::connect(standby.url()).await.unwrap();
    let body: (String,) = sqlx::query_as("SELECT body FROM notes")
        .fetch_one(&mut conn)
        .await
        .expect("the committed row is on the promoted standby");
    assert_eq!(body.0, "replicated");
    sqlx::query("INSERT INTO notes (body) VALUES ('after')")
        .execute(&mut conn)
        .await
        .expect("the promoted standby takes writes");
    conn.close().await.unwrap();
    drop(standby);
    std::fs::remove_dir_all(&parent).unwrap();
}
