//! Concurrent histories against our server (memory and PostgreSQL engines) must be
//! linearizable and keep the drain invariants; a broker that leases one span twice must
//! be caught by the search, and its timeline written; a broker that answers 201 before
//! the write is durable (and loses it) must be caught by the drain ("lost").
//!
//! The PostgreSQL test needs the `embedded` feature (queen-pg); the rest builds with
//! `--no-default-features`.

mod common;

use async_trait::async_trait;
use common::*;
use queen_conformance::concurrent::{run_scenario, summary, timeline, Verdict, Workload};
use queen_conformance::session::{CheckSettings, Target};
use queen_reference::wire::*;
use queen_server::broker::Broker;
use queen_server::memory::MemoryBroker;
use queen_server::wakes::Wakes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

fn workload(clients: usize, ops: usize, seed: u64) -> Workload {
    Workload::new(clients, ops, 2, seed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_engine_histories_are_linearizable() {
    let server = serve(Arc::new(memory())).await;
    let target = Target::new(&server.url(), CheckSettings::default());
    for seed in 1..=3 {
        let s = run_scenario(&target, &workload(4, 25, seed), 20_000).await;
        assert!(s.passed(), "{}", s.summary());
        // Every generated call, and client 0's pop and extend in each expiry burst.
        let expiry = (0..25 / 4).filter(|&k| s.workload.expiry_burst(k)).count();
        let n = s.history.ops.len();
        assert!((100..=100 + 2 * expiry).contains(&n), "{n} calls");
        assert!(
            expiry > 0 && n > 100,
            "{n} calls: no expiry burst extended a lease"
        );
        assert!(s.drain.complete() && s.invariants.deliveries > 0);
    }
}

#[cfg(feature = "embedded")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_engine_histories_are_linearizable() {
    // The PostgreSQL the other tests use (Docker or local binaries, pg/NOTES.md).
    let db = queen_pg::TestDb::new()
        .await
        .expect("a PostgreSQL for tests (see pg/NOTES.md)");
    let spool = std::env::temp_dir().join(format!(
        "queen-conformance-concurrent-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    ));
    std::fs::create_dir_all(&spool).expect("spool dir");
    let mut config = queen_server::config::Config::defaults();
    config.spool_dir = spool.clone();
    config.pool_size = 8;
    let broker = queen_server::pg::PgBroker::connect(db.url(), &config)
        .await
        .expect("PgBroker starts");
    let server =
        queen_server::app::spawn(Arc::new(broker), &config, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("binds");
    let settings = CheckSettings {
        body_limit: config.body_limit,
        default_timeout_ms: config.pop_timeout_ms(),
        ..CheckSettings::default()
    };
    let target = Target::new(&server.url(), settings);
    for seed in 1..=2 {
        let s = run_scenario(&target, &workload(4, 20, seed), 20_000).await;
        assert!(s.passed(), "{}", s.summary());
    }
    let _ = server.stop().await;
    let _ = std::fs::remove_dir_all(spool);
}

/// Answers a pop with the span the previous pop of the same route and group was just
/// given, under a second, fresh lease: two live leases on one cursor.
struct DoubleLease {
    inner: MemoryBroker,
    last: Mutex<HashMap<String, PopResponse>>,
}

#[async_trait]
impl Broker for DoubleLease {
    async fn call(&self, req: Request) -> Answer {
        if let Request::Pop { .. } = &req {
            let key = format!("{req:?}");
            let replay = self.last.lock().unwrap().remove(&key);
            if let Some(mut again) = replay {
                again.lease_id = uuid::Uuid::new_v4().to_string();
                for m in &mut again.messages {
                    m.lease_id = again.lease_id.clone();
                }
                return Answer::Popped(again);
            }
            let a = self.inner.call(req).await;
            if let Answer::Popped(p) = &a {
                self.last.lock().unwrap().insert(key, p.clone());
            }
            return a;
        }
        self.inner.call(req).await
    }

    fn wakes(&self) -> &Wakes {
        self.inner.wakes()
    }

    async fn pop_paused(&self) -> bool {
        self.inner.pop_paused().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_leasing_one_span_twice_is_not_linearizable() {
    let server = serve(Arc::new(DoubleLease {
        inner: memory(),
        last: Mutex::new(HashMap::new()),
    }))
    .await;
    let target = Target::new(&server.url(), CheckSettings::default());
    let mut w = workload(2, 25, 11);
    w.queues = 1;
    // Proving a violation means refuting every order of the calls before it: two
    // clients keep that small, but how much the calls overlap depends on timing, and
    // closely overlapping histories have needed more than 50,000 steps.
    let s = run_scenario(&target, &w, 200_000).await;
    let (h, out) = (&s.history, &s.outcome);
    assert_eq!(out.verdict_name(), "violation", "{}", summary(h, out));
    let Verdict::Violation(v) = &out.keys[0].verdict else {
        unreachable!()
    };
    assert!(!v.refused.is_empty());
    let page = timeline::html(h, out);
    assert!(page.contains("<svg") && page.contains("REFUSED"), "{page}");
    in_a_browser(&page);
    // The invariants see it too, without the search: each replayed span is either a
    // second live lease, or delivered again past a commit, or again with nothing to
    // explain it (which of them depends on the timing of the acks).
    let counts = s.invariants.counts();
    println!("{}", s.summary());
    let caught: usize = ["double-lease", "past-cursor", "duplicate"]
        .iter()
        .map(|k| counts[k].bad)
        .sum();
    assert!(caught >= 1 && !s.invariants.passed(), "{}", s.summary());
}

/// Answers every third push 201 `queued` at once and never writes it: the write was to
/// happen after the answer and was lost (as in a crash before it was durable).
struct AcksBeforeDurable {
    inner: MemoryBroker,
    pushes: AtomicUsize,
}

#[async_trait]
impl Broker for AcksBeforeDurable {
    async fn call(&self, req: Request) -> Answer {
        if let Request::Push(p) = &req {
            if self.pushes.fetch_add(1, Ordering::SeqCst) % 3 == 2 {
                let items = p
                    .items
                    .iter()
                    .enumerate()
                    .map(|(index, it)| PushResult {
                        index,
                        message_id: uuid::Uuid::now_v7().to_string(),
                        transaction_id: it.transaction_id.clone().unwrap_or_default(),
                        queue_name: it.queue.clone(),
                        status: PushStatus::Queued,
                    })
                    .collect();
                return Answer::Pushed(items);
            }
        }
        self.inner.call(req).await
    }

    fn wakes(&self) -> &Wakes {
        self.inner.wakes()
    }

    async fn pop_paused(&self) -> bool {
        self.inner.pop_paused().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_acknowledging_pushes_before_they_are_durable_loses_them_in_the_drain() {
    let server = serve(Arc::new(AcksBeforeDurable {
        inner: memory(),
        pushes: AtomicUsize::new(0),
    }))
    .await;
    let target = Target::new(&server.url(), CheckSettings::default());
    let s = run_scenario(&target, &workload(3, 20, 5), 20_000).await;
    let text = s.summary();
    println!("{text}");
    assert!(!s.passed(), "{text}");
    assert!(s.drain.complete(), "{text}");
    let lost = s.invariants.counts()["lost"];
    // Every dropped message is missing for queue mode at least (the drain pops it).
    assert!(lost.bad >= 1, "{text}");
    assert_eq!(lost.allowed, 0);
    assert!(text.contains("lost") && text.contains("BAD lost"), "{text}");
    let json = s.invariants.to_json();
    assert_eq!(json["counts"]["lost"]["bad"], lost.bad);
}

/// A headless Chromium (`QUEEN_BROWSER`, else `chromium` or `google-chrome` on the PATH),
/// or `None`: the browser checks are then skipped with a note, unless
/// `QUEEN_REQUIRE_BROWSER=1` (CI), which makes a missing browser a failure.
fn browser() -> Option<String> {
    let candidates = std::env::var("QUEEN_BROWSER")
        .map(|b| vec![b])
        .unwrap_or_else(|_| {
            vec![
                "chromium".into(),
                "chromium-browser".into(),
                "google-chrome".into(),
            ]
        });
    let found = candidates.into_iter().find(|b| {
        std::process::Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        assert!(
            std::env::var("QUEEN_REQUIRE_BROWSER").map_or(true, |v| v != "1"),
            "QUEEN_REQUIRE_BROWSER=1 but no headless browser was found (set QUEEN_BROWSER)"
        );
        eprintln!("skipped: no chromium on the PATH to render the timeline in");
    }
    found
}

/// The timeline as a person sees it: rendered by a real browser at two window widths,
/// nothing overflows the page sideways, and the screenshot shows a chart (many colours),
/// not a blank page.
fn in_a_browser(page: &str) {
    let Some(chrome) = browser() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("queen-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let probe = page.replace(
        "</body>",
        "<script>window.addEventListener('load', () => document.body.setAttribute(\
         'data-overflow', String(document.documentElement.scrollWidth > window.innerWidth)))\
         </script></body>",
    );
    let file = dir.join("timeline.html");
    std::fs::write(&file, probe).unwrap();
    let url = format!("file://{}", file.display());
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&chrome)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .args(args)
            .arg(&url)
            .output()
            .expect("the browser runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for width in [1280, 800] {
        let size = format!("--window-size={width},900");
        let dom = run(&[&size, "--dump-dom"]);
        assert!(
            dom.contains("data-overflow=\"false\""),
            "the timeline overflows a {width} px window"
        );
    }
    let shot = dir.join("timeline.png");
    run(&[
        "--window-size=1280,900",
        &format!("--screenshot={}", shot.display()),
    ]);
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.color_type.samples();
    let colours: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    assert!(
        colours.len() > 16,
        "a blank screenshot ({} colours)",
        colours.len()
    );
    let _ = std::fs::remove_dir_all(dir);
}
