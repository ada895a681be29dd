//! parked-polls: N long polls parked at once (each its own consumer group, so all may
//! receive the one message), then one push: every poll must wake with it. Reports the
//! broker's RSS and the database connections in use while they are parked.

use crate::client::Client;
use crate::report::Outcome;
use crate::target::Target;
use serde_json::json;
use std::time::{Duration, Instant};

pub async fn run(
    client: &Client,
    target: &Target,
    queue: &str,
    polls: usize,
) -> Result<Outcome, String> {
    let mut tasks = Vec::with_capacity(polls);
    for i in 0..polls {
        let c = client.on(i);
        let path = format!("/api/v1/pop/queue/{queue}?wait=true&timeout=60000&consumerGroup=g{i}");
        tasks.push(tokio::spawn(async move { c.get(&path).await.map(|r| r.0) }));
    }
    // Let every poll reach the server and park.
    tokio::time::sleep(Duration::from_millis(3000 + polls as u64 / 2)).await;
    let rss = target.rss_mib();
    let connections = match &target.database_url {
        Some(url) => {
            let pool = sqlx::PgPool::connect(url)
                .await
                .map_err(|e| e.to_string())?;
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
                .fetch_one(&pool)
                .await
                .map_err(|e| e.to_string())?;
            pool.close().await;
            Some(n)
        }
        None => None,
    };
    let pushed = Instant::now();
    let (s, _) = client
        .post(
            "/api/v1/push",
            &json!({"items": [{"queue": queue, "payload": "wake up"}]}),
        )
        .await
        .map_err(|e| e.to_string())?;
    if s != 201 {
        return Err(format!("push answered {s}"));
    }
    let mut woken = 0;
    let mut failed = 0;
    let mut first_failure: Option<String> = None;
    for t in tasks {
        match t.await.map_err(|e| e.to_string())? {
            Ok(200) => woken += 1,
            other => {
                failed += 1;
                first_failure.get_or_insert_with(|| format!("{other:?}"));
            }
        }
    }
    let all_woken = pushed.elapsed().as_secs_f64();
    Ok(Outcome {
        workload: "parked-polls".into(),
        value: woken as f64,
        unit: "woken".into(),
        details: json!({"polls": polls, "woken": woken, "failed": failed, "all_woken_s": all_woken,
                        "server_rss_mib": rss, "db_connections": connections,
                        "first_failure": first_failure}),
    })
}
