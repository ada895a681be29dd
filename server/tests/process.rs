//! The `queen-server` binary as an operator runs it: with no arguments it starts the
//! embedded PostgreSQL, answers `/health`, keeps its data across a restart, and seals
//! encrypted queues with a key of its own (ENC-4); two
//! processes on one database share leases (ACK-4) and wake each other's pops (POP-11).

mod common;
use common::*;
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server(Child);

impl Server {
    fn start(envs: &[(&str, String)], dir: &std::path::Path) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_queen-server"));
        cmd.current_dir(dir)
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        Server(cmd.spawn().expect("queen-server starts"))
    }

    /// SIGTERM, then wait: the graceful path.
    fn terminate(mut self) {
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.0.try_wait() {
                assert!(
                    status.success(),
                    "queen-server exited with {status} after SIGTERM"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("queen-server did not stop within 20 s of SIGTERM");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_arguments_starts_embedded_postgres_and_keeps_data_across_restart() {
    let dir = TempDir::new("embedded");
    let c = reqwest::Client::new();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let pg_port = free_port();
    let envs = [
        ("PORT", port.to_string()),
        ("QUEEN_EMBEDDED_PG_PORT", pg_port.to_string()),
    ];
    let server = Server::start(&envs, &dir);
    wait_healthy(&c, &base, Duration::from_secs(90)).await;
    let (s, body) = get(&c, &format!("{base}/health")).await;
    let mut body = body.unwrap();
    // HEALTH-4: the uptime is the clock's; it is there, as a number.
    let uptime = body.as_object_mut().unwrap().remove("uptimeSeconds");
    assert!(uptime.is_some_and(|u| u.is_u64()), "{body}");
    assert_eq!(
        (s, body),
        (
            200,
            json!({"status": "healthy", "database": "connected",
                   "spool": {"items": 0, "bytes": 0, "capacity": 1u64 << 30, "replay": "idle",
                             "quarantined": 0},
                   "pushWriterRestarts": 0, "degraded": [],
                   "version": env!("CARGO_PKG_VERSION")})
        )
    );
    let (s, _) = post(
        &c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": "kept", "transactionId": "survivor", "payload": {"n": 1}}]}),
    )
    .await;
    assert_eq!(s, 201);
    enc_4_an_encrypted_queue_works_and_is_sealed(&c, &base, pg_port).await;
    server.terminate();
    assert!(
        dir.join(".queen/postgres/PG_VERSION").is_file(),
        "the default data directory is ./.queen/postgres"
    );
    let key = dir.join(".queen/postgres.key");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the key file is its owner's only");
    let made = std::fs::read_to_string(&key).unwrap();

    let server = Server::start(&envs, &dir);
    wait_healthy(&c, &base, Duration::from_secs(60)).await;
    let (s, body) = get(&c, &format!("{base}/api/v1/pop/queue/kept")).await;
    assert_eq!(s, 200, "the message survived the restart");
    assert_eq!(body.unwrap()["messages"][0]["transactionId"], "survivor");
    // The key is read back, not made again: the sealed message opens after the restart.
    let (s, body) = get(&c, &format!("{base}/api/v1/pop/queue/sealed")).await;
    assert_eq!(
        (s, &body.unwrap()["messages"][0]["data"]),
        (200, &json!({"secret": 7}))
    );
    assert_eq!(std::fs::read_to_string(&key).unwrap(), made);
    server.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

/// ENC-4: with no key given, the embedded broker configures an encrypted queue and the
/// stored row is sealed, read straight from the embedded cluster on `pg_port`.
async fn enc_4_an_encrypted_queue_works_and_is_sealed(
    c: &reqwest::Client,
    base: &str,
    pg_port: u16,
) {
    let (s, _) = post(
        c,
        &format!("{base}/api/v1/configure"),
        &json!({"queue": "sealed", "options": {"encryptionEnabled": true}}),
    )
    .await;
    assert_eq!(
        s, 200,
        "encryption works out of the box on the embedded database"
    );
    let (s, _) = post(
        c,
        &format!("{base}/api/v1/push"),
        &json!({"items": [{"queue": "sealed", "transactionId": "s1", "payload": {"secret": 7}}]}),
    )
    .await;
    assert_eq!(s, 201);
    let url = format!("postgres://postgres@127.0.0.1:{pg_port}/postgres");
    let pool = sqlx::PgPool::connect(&url)
        .await
        .expect("the embedded cluster");
    let (sealed, data): (bool, String) = sqlx::query_as(
        "SELECT m.sealed, m.data::text FROM queen_messages m
         JOIN queen_partitions p ON p.id = m.partition_id
         JOIN queen_queues q ON q.id = p.queue_id WHERE q.name = 'sealed'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(sealed && !data.contains("secret"), "stored sealed: {data}");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_one_database_share_leases_and_wake_each_other() {
    let db = own_database().await;
    let dir = TempDir::new("two");
    let c = reqwest::Client::new();
    let (pa, pb) = (free_port(), free_port());
    let env = |port: u16, spool: &str| {
        vec![
            ("PORT", port.to_string()),
            ("DATABASE_URL", db.url().to_string()),
            ("SPOOL_DIR", dir.join(spool).display().to_string()),
            // A parked pop looks again only after a minute: one answered before its
            // timeout was woken by the other process's notification, on any machine.
            ("POP_WAIT_INITIAL_INTERVAL_MS", "60000".to_string()),
            ("POP_WAIT_MAX_INTERVAL_MS", "60000".to_string()),
        ]
    };
    let a = Server::start(&env(pa, "spool-a"), &dir);
    let b = Server::start(&env(pb, "spool-b"), &dir);
    let (ua, ub) = (
        format!("http://127.0.0.1:{pa}"),
        format!("http://127.0.0.1:{pb}"),
    );
    wait_healthy(&c, &ua, Duration::from_secs(60)).await;
    wait_healthy(&c, &ub, Duration::from_secs(60)).await;

    // ACK-4 across processes: 16 consumers of one group, spread over both, one partition.
    post(
        &c,
        &format!("{ua}/api/v1/push"),
        &json!({"items": [{"queue": "shared", "payload": 1}, {"queue": "shared", "payload": 2}]}),
    )
    .await;
    let pops = (0..16).map(|i| {
        let c = c.clone();
        let url = format!(
            "{}/api/v1/pop/queue/shared?consumerGroup=g&batch=10",
            if i % 2 == 0 { &ua } else { &ub }
        );
        tokio::spawn(async move { get(&c, &url).await.0 })
    });
    let statuses: Vec<u16> = futures_join(pops).await;
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "exactly one consumer gets the batch: {statuses:?}"
    );
    assert_eq!(statuses.iter().filter(|s| **s == 204).count(), 15);

    // POP-11 across processes: a pop parked on B is woken by a push on A.
    let parked = {
        let c = c.clone();
        let url = format!("{ub}/api/v1/pop/queue/wake?wait=true&timeout=10000");
        tokio::spawn(async move {
            let r = get(&c, &url).await;
            (r, Instant::now())
        })
    };
    tokio::time::sleep(Duration::from_millis(2500)).await; // parked
    let pushed = Instant::now();
    post(
        &c,
        &format!("{ua}/api/v1/push"),
        &json!({"items": [{"queue": "wake", "payload": "hi"}]}),
    )
    .await;
    let ((s, _), woke) = parked.await.unwrap();
    // Delivered before its 10 s timeout with no re-check due for a minute: woken.
    assert_eq!(
        s, 200,
        "the parked pop was woken by the push on the other process"
    );
    let latency = woke.duration_since(pushed);
    eprintln!("cross-process wake-up: {latency:?} from push start to pop return");
    a.terminate();
    b.terminate();
    let _ = std::fs::remove_dir_all(&dir);
}

async fn futures_join<T: Send + 'static>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for t in tasks.collect::<Vec<_>>() {
        out.push(t.await.unwrap());
    }
    out
}

/// The log lines of a memory-engine server started with `envs`, read from its piped
/// stdout until it says it is listening; then it is stopped.
fn log_lines(envs: &[(&str, &str)]) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_queen-server"));
    cmd.args(["--engine", "memory", "--port", &free_port().to_string()])
        .env_remove("RUST_LOG")
        .env_remove("LOG_FORMAT")
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut server = Server(cmd.spawn().expect("queen-server starts"));
    let out = server.0.stdout.take().expect("piped");
    let mut lines = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.expect("utf-8 log line");
        let done = line.contains("listening on");
        lines.push(line);
        if done {
            break;
        }
    }
    server.terminate();
    lines
}

#[test]
fn logs_to_a_pipe_are_plain_text_or_json_lines_when_asked() {
    let text = log_lines(&[]);
    assert!(text.iter().any(|l| l.contains("listening on")), "{text:?}");
    assert!(
        text.iter().all(|l| !l.contains('\u{1b}')),
        "no colour escapes in a redirected log: {text:?}"
    );
    let json = log_lines(&[("LOG_FORMAT", "json")]);
    assert!(!json.is_empty());
    for l in &json {
        let v: serde_json::Value = serde_json::from_str(l).expect("one JSON object per line");
        assert!(v["timestamp"].is_string() && v["level"].is_string(), "{l}");
    }
    assert!(json.iter().any(|l| l.contains("listening on")), "{json:?}");
}

#[test]
fn an_unknown_log_format_stops_the_server_at_start() {
    let out = Command::new(env!("CARGO_BIN_EXE_queen-server"))
        .args(["--engine", "memory", "--port", &free_port().to_string()])
        .env("LOG_FORMAT", "xml")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("LOG_FORMAT=xml: expected text or json"),
        "{err}"
    );
}

/// The allocator hands freed pages back within 100 ms (the binary's `malloc_conf`), and
/// an operator's `_RJEM_MALLOC_CONF` is read after it, so it can still change that.
#[test]
fn the_allocator_returns_memory_soon_and_the_environment_can_say_otherwise() {
    let conf = |env: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_queen-server"))
            .arg("--help")
            .env("_RJEM_MALLOC_CONF", env)
            .output()
            .expect("runs");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let set = |log: &str| -> Vec<String> {
        log.lines()
            .filter_map(|l| l.strip_prefix("<jemalloc>: -- Set conf value: "))
            .map(str::to_string)
            .collect()
    };
    let built_in = conf("confirm_conf:true");
    assert_eq!(
        set(&built_in),
        [
            "dirty_decay_ms:100",
            "muzzy_decay_ms:0",
            "confirm_conf:true"
        ],
        "{built_in}"
    );
    let overridden = conf("confirm_conf:true,dirty_decay_ms:10000");
    assert_eq!(
        set(&overridden).last().map(String::as_str),
        Some("dirty_decay_ms:10000"),
        "{overridden}"
    );
}
