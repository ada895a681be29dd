//! Several database hosts in one `DATABASE_URL` (CLUSTER-4): the broker starts on the
//! first host that answers and accepts writes, and refuses to start when none does. The
//! failover itself (a standby promoted while the broker runs) is the `failover` fault
//! scenario's; these tests pin down the choice of host at start, which needs only one
//! PostgreSQL.

mod common;

use common::*;
use queen_server::pg::PgBroker;

/// `url` with its `host:port` replaced by `hosts(host:port)`.
fn with_hosts(url: &str, hosts: impl Fn(&str) -> String) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let at = authority.rfind('@').map_or(0, |i| i + 1);
    let (userinfo, host) = authority.split_at(at);
    assert!(
        !host.is_empty(),
        "the test database's URL names no host: {url}"
    );
    format!("{scheme}://{userinfo}{}{tail}", hosts(host))
}

/// A port nothing listens on, so its host refuses the connection at once.
fn refusing_host() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// CLUSTER-4: a host that does not answer is passed over for the next, and the broker
/// works on the one it found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_4_the_broker_starts_on_the_first_host_that_answers() {
    let db = own_database().await;
    let url = with_hosts(db.url(), |real| format!("{},{real}", refusing_host()));
    let dir = TempDir::new("hosts-first");
    let broker = PgBroker::connect(&url, &config(&dir))
        .await
        .unwrap_or_else(|e| panic!("{url}: {e}"));
    let writable: String = sqlx::query_scalar("SHOW transaction_read_only")
        .fetch_one(broker.pool())
        .await
        .unwrap();
    assert_eq!(writable, "off");
    let queues: i64 = sqlx::query_scalar("SELECT count(*) FROM queen_queues")
        .fetch_one(broker.pool())
        .await
        .unwrap();
    assert_eq!(queues, 0, "the schema is in place on the host found");
}

/// CLUSTER-4: with several hosts the broker writes only to one that accepts writes
/// (`read-write` is their default), so a database that takes none stops the start with
/// the reason; a host that refuses the connection is named no better.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_4_several_hosts_that_take_no_writes_stop_the_start() {
    let db = own_database().await;
    let admin = sqlx::PgPool::connect(db.url()).await.unwrap();
    let read_only = format!(
        "ALTER DATABASE \"{}\" SET default_transaction_read_only = on",
        db.name()
    );
    sqlx::query(&read_only).execute(&admin).await.unwrap();
    admin.close().await;
    let url = with_hosts(db.url(), |real| format!("{},{real}", refusing_host()));
    let dir = TempDir::new("hosts-read-only");
    let err = PgBroker::connect(&url, &config(&dir))
        .await
        .err()
        .expect("a start on hosts that take no writes is refused");
    assert!(err.to_string().contains("does not accept writes"), "{err}");
}
