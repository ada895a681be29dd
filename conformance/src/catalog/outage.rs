//! Cases that stop the broker's database (capability `database-control`, PROTOCOL.md
//! HEALTH-1 and PUSH-7): health answers 503 while it is down, pushes are spooled and
//! answer `buffered`, and once it is back every spooled message is written exactly once,
//! in order. The model has no "database down" input, so answers during the outage are
//! recorded unchecked and asserted by the case; the spooled pushes are then given to the
//! model as applied at some moment before the replay was seen to finish, and every later
//! answer is checked against that. They run alone, last, and always restart the database.

use super::cases;
use crate::calls::*;
use crate::case::{Case, CaseResult, Failure};
use crate::database::Database;
use crate::failure::{ensure, fail};
use crate::rules::*;
use crate::session::*;
use crate::transport::{now_ms, transmit};
use queen_reference::time::Millis;
use queen_reference::wire::*;
use serde_json::{json, Value};

pub fn cases() -> Vec<Case> {
    cases![
        unhealthy: "health-1/unhealthy-503-while-the-database-is-down", [HEALTH_1], Project, DatabaseControl, alone = true;
        spooled: "push-7/database-unreachable-spools-and-replays-in-order", [PUSH_7, PUSH_5, PUSH_1], Seed, DatabaseControl, alone = true;
    ]
}

/// How long the database may take to come back and the spool to drain.
const RECOVERY_MS: Millis = 30_000;

fn db_failure(e: String) -> Failure {
    Failure::Transport(format!("database control: {e}"))
}

/// Polls `GET path` unchecked until `done` holds for the answer (the broker recovers at
/// its own pace); fails after [`RECOVERY_MS`].
async fn wait_for(
    s: &mut Session,
    path: &str,
    done: impl Fn(&HttpResponse) -> bool,
    what: &str,
) -> CaseResult {
    let t0 = now_ms();
    loop {
        let r = transmit(s.target(), &HttpRequest::get(path, &[])).await;
        if r.as_ref().is_ok_and(&done) {
            return Ok(());
        }
        if now_ms() - t0 > RECOVERY_MS {
            return Err(fail(
                format!(
                    "{what} within {} s of the database's restart",
                    RECOVERY_MS / 1000
                ),
                &[PUSH_7, HEALTH_1],
            ));
        }
        sleep_ms(200).await;
    }
}

/// Runs `during` with the database stopped, then starts it again whatever happened.
async fn while_down<T>(
    s: &mut Session,
    db: &Database,
    during: impl AsyncFnOnce(&mut Session) -> Result<T, Failure>,
) -> Result<T, Failure> {
    db.0.stop().await.map_err(db_failure)?;
    let r = during(s).await;
    db.0.start().await.map_err(db_failure)?;
    r
}

async fn unhealthy(s: &mut Session) -> CaseResult {
    let db = s.database()?;
    s.get("/health", &[]).await?;
    let down = while_down(s, &db, async |s: &mut Session| {
        s.send_unchecked(HttpRequest::get("/health", &[])).await
    })
    .await?;
    let status = down.body.as_ref().and_then(|b| b.get("status"));
    ensure!(
        down.status == 503 && status == Some(&json!("unhealthy")),
        HEALTH_1,
        "health while the database is down: {} {}",
        down.status,
        down.body
            .as_ref()
            .map_or("(no body)".into(), Value::to_string)
    )?;
    wait_for(s, "/health", |r| r.status == 200, "health is not 200 again").await?;
    // Checked: healthy and connected again.
    s.get("/health", &[]).await?;
    Ok(())
}

async fn spooled(s: &mut Session) -> CaseResult {
    let db = s.database()?;
    let q = s.name("q");
    s.push1(&q, "p", "before").await?;
    let batches: Vec<Vec<&str>> = vec![vec!["d1", "d2"], vec!["d3", "before"], vec!["d4"]];
    let requests: Vec<HttpRequest> = batches
        .iter()
        .map(|txns| {
            let items: Vec<Value> = txns
                .iter()
                .map(|t| json!({"queue": q, "partition": "p", "transactionId": t, "payload": {"txn": t}}))
                .collect();
            HttpRequest::post("/api/v1/push", &json!({ "items": items }))
        })
        .collect();
    let sent = while_down(s, &db, async |s: &mut Session| {
        let mut sent = Vec::new();
        for req in &requests {
            let t0 = now_ms();
            let r = s.send_unchecked(req.clone()).await?;
            let items: Vec<PushResult> =
                serde_json::from_value(r.body.clone().unwrap_or(Value::Null)).unwrap_or_default();
            let n = req_items(req);
            ensure!(
                r.status == 201
                    && items.len() == n
                    && items.iter().all(|i| i.status == PushStatus::Buffered),
                [PUSH_7, PUSH_1],
                "a push while the database is down answered {} {}",
                r.status,
                r.body.as_ref().map_or("(no body)".into(), Value::to_string)
            )?;
            sent.push(t0);
        }
        Ok(sent)
    })
    .await?;
    // Back: the spool drains (bufferedMessages 0) once the broker sees the database.
    wait_for(
        s,
        "/api/v1/system/maintenance",
        |r| {
            r.status == 200
                && r.body.as_ref().and_then(|b| b.get("bufferedMessages")) == Some(&json!(0))
        },
        "the spool is not replayed",
    )
    .await?;
    let until = now_ms();
    for (req, t0) in requests.iter().zip(sent) {
        s.assume_applied(req, t0, until)?;
    }
    // Every buffered message exactly once, in order, after what was there before
    // ("before" was a duplicate); the model checks each message and its timestamps.
    let p = s.pop_q(&q, &[("batch", "10")]).await?;
    ensure!(
        txns(&p) == ["before", "d1", "d2", "d3", "d4"],
        PUSH_7,
        "after the replay: {:?}",
        txns(&p)
    )?;
    let p = p.expect("delivered");
    s.ack_batch(None, acks_for(&p, "completed")).await?;
    ensure!(
        s.pop_q(&q, &[("batch", "10")]).await?.is_none(),
        PUSH_7,
        "nothing is delivered twice"
    )
}

fn req_items(req: &HttpRequest) -> usize {
    serde_json::from_slice::<Value>(&req.body)
        .ok()
        .and_then(|b| b["items"].as_array().map(Vec::len))
        .unwrap_or(0)
}
