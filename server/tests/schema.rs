//! The schema's functions (`server/sql`): applied after the migrations, again only when a
//! file changed, and the options row the SQL rules read is always complete.

mod common;

use common::{config, own_database, TempDir};
use queen_server::pg::PgBroker;

async fn stored(pool: &sqlx::PgPool) -> Vec<(String, String)> {
    sqlx::query_as("SELECT file, source FROM queen_functions ORDER BY file")
        .fetch_all(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn functions_are_replaced_only_when_a_file_changed() {
    let db = own_database().await;
    let dir = TempDir::new("schema");
    let cfg = config(&dir);
    let first = PgBroker::connect(db.url(), &cfg).await.unwrap();
    let pool = first.pool().clone();
    let files = stored(&pool).await;
    let on_disk = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/sql"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sql")
        })
        .count();
    assert_eq!(
        files.len(),
        on_disk,
        "every file under server/sql is recorded"
    );
    let oid = |pool: sqlx::PgPool| async move {
        let (oid, xmin): (i64, String) = sqlx::query_as(
            "SELECT oid::bigint, xmin::text FROM pg_proc WHERE proname = 'queen_claim'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        (oid, xmin)
    };
    let before = oid(pool.clone()).await;
    drop(first);
    // A start with the same files leaves the functions alone (no new catalog row).
    let dir2 = TempDir::new("schema2");
    let cfg2 = config(&dir2);
    let again = PgBroker::connect(db.url(), &cfg2).await.unwrap();
    assert_eq!(oid(pool.clone()).await, before);
    drop(again);
    // A start whose files differ from the recorded ones replaces them all.
    sqlx::query("UPDATE queen_functions SET source = 'changed' WHERE file = '03_claim.sql'")
        .execute(&pool)
        .await
        .unwrap();
    let dir3 = TempDir::new("schema3");
    let cfg3 = config(&dir3);
    let _third = PgBroker::connect(db.url(), &cfg3).await.unwrap();
    assert_ne!(
        oid(pool.clone()).await.1,
        before.1,
        "queen_claim was replaced"
    );
    assert_eq!(stored(&pool).await, files);
}

#[tokio::test]
async fn a_queue_row_without_the_options_the_sql_rules_read_is_refused() {
    let db = own_database().await;
    let dir = TempDir::new("schemaopts");
    let broker = PgBroker::connect(db.url(), &config(&dir)).await.unwrap();
    let err = sqlx::query(
        "INSERT INTO queen_queues (name, namespace, task, options) VALUES ('q', '', '', '{\"retryLimit\": 3}')",
    )
    .execute(broker.pool())
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("queen_queues_options_complete"),
        "{err}"
    );
}

/// A database made before cursors named their queue gains the column when the server
/// upgrades it, filled from each cursor's partition, so the queue listings count the
/// groups that were already reading (MGMT-4's `consumerGroups`).
#[tokio::test]
async fn an_upgrade_names_the_queue_of_every_existing_cursor() {
    let db = own_database().await;
    let before = TempDir::new("migrations-before-cursor-queue");
    for entry in std::fs::read_dir("migrations").unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.as_str() < "0014" {
            std::fs::copy(&path, before.join(&name)).unwrap();
        }
    }
    let pool = sqlx::PgPool::connect(db.url()).await.unwrap();
    sqlx::migrate::Migrator::new(before.path())
        .await
        .unwrap()
        .run(&pool)
        .await
        .unwrap();
    sqlx::raw_sql(
        "INSERT INTO queen_queues (name, namespace, task, options)
         SELECT q, '', '', '{\"leaseTime\": 30, \"windowBuffer\": 0, \"delayedProcessing\": 0}'
         FROM unnest(ARRAY['a', 'b']) q;
         INSERT INTO queen_partitions (id, queue_id, name)
         SELECT gen_random_uuid(), q.id, 'p' || n FROM queen_queues q, generate_series(1, 2) n;
         INSERT INTO queen_cursors (partition_id, consumer_group)
         SELECT p.id, g FROM queen_partitions p, unnest(ARRAY['g1', 'g2']) g;",
    )
    .execute(&pool)
    .await
    .unwrap();
    let dir = TempDir::new("upgraded");
    let broker = PgBroker::connect(db.url(), &config(&dir)).await.unwrap();
    let (cursors, named): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE c.queue_id = p.queue_id)
         FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id",
    )
    .fetch_one(broker.pool())
    .await
    .unwrap();
    assert_eq!((cursors, named), (8, 8));
}
