//! What a watch tells: each finding as it is made, counts at `GET /metrics`, and at the
//! end a report of the period watched (terminal, JSON, JUnit) with each queue's verdict.
//!
//! A watch fails, like a run, on a finding at SEED level (and, with `--strict`, at
//! PROJECT level). A queue the watcher could not judge (unknown, undecided) is listed
//! with the reason and does not fail it: the traffic, not the broker, left it open.

use super::online::{Counts, Online, QueueVerdict, WatchFinding};
use super::proxy::Shared;
use crate::report::terminal::Paint;
use queen_reference::rules::Level;
use serde::Serialize;
use std::fmt::Write;
use std::sync::Arc;

/// One queue's verdict in the report.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueEntry {
    /// The queue's name.
    pub name: String,
    /// How its traffic was judged, and why it stopped being judged.
    #[serde(flatten)]
    pub verdict: QueueVerdict,
    /// Exchanges judged on it.
    pub checked: u64,
}

/// The report of a period watched (or a history checked).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WatchReport {
    /// The broker watched.
    pub target: String,
    /// When the period started (ms since the Unix epoch).
    pub started_ms: i64,
    /// How long it lasted (ms).
    pub duration_ms: i64,
    /// Counts of the traffic.
    pub counts: Counts,
    /// Each queue seen, by name.
    pub queues: Vec<QueueEntry>,
    /// Every finding, in the order made.
    pub findings: Vec<WatchFinding>,
    /// Whether PROJECT findings fail the watch.
    pub strict: bool,
    /// No finding fails the watch.
    pub passed: bool,
}

impl WatchReport {
    /// The report of what `online` judged.
    pub fn of(online: &Online, target: &str, started_ms: i64, strict: bool) -> WatchReport {
        let queues = online
            .verdicts()
            .into_iter()
            .map(|(name, verdict, checked)| QueueEntry {
                name,
                verdict,
                checked,
            })
            .collect();
        let findings = online.findings.clone();
        let passed = !findings.iter().any(|f| fails(f, strict));
        WatchReport {
            target: target.to_string(),
            started_ms,
            duration_ms: queen_reference::time::wall_clock_ms() - started_ms,
            counts: online.counts.clone(),
            queues,
            findings,
            strict,
            passed,
        }
    }

    /// 0 when no finding fails the watch, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        i32::from(!self.passed)
    }

    /// The closing summary for a terminal.
    pub(crate) fn render(&self, paint: Paint) -> String {
        let mut out = String::new();
        let c = &self.counts;
        let _ = writeln!(
            out,
            "\nwatched {}: {} exchanges, {} judged by the model",
            self.target, c.exchanges, c.checked
        );
        for (why, n) in &c.not_checked {
            let _ = writeln!(out, "  {n} not judged: {why}");
        }
        if c.retired > 0 {
            let queues = if c.retired == 1 { "queue" } else { "queues" };
            let _ = writeln!(
                out,
                "  {} {queues} deleted during the watch, nothing found on them",
                c.retired
            );
        }
        for q in &self.queues {
            let (mark, why) = match &q.verdict {
                QueueVerdict::Checked => (paint.green("checked"), String::new()),
                QueueVerdict::Violated(w) => (paint.red("violated"), format!(": {w}")),
                QueueVerdict::Unknown(w) => (paint.yellow("unknown"), format!(": {w}")),
                QueueVerdict::Undecided(w) => (paint.yellow("undecided"), format!(": {w}")),
            };
            let _ = writeln!(
                out,
                "  queue {:?} {mark} ({} judged){why}",
                q.name, q.checked
            );
        }
        let failing = self
            .findings
            .iter()
            .filter(|f| fails(f, self.strict))
            .count();
        let verdict = match self.passed {
            true => paint.green("passed"),
            false => paint.red("failed"),
        };
        let _ = writeln!(
            out,
            "{verdict}: {} findings, {failing} failing the watch",
            self.findings.len()
        );
        out
    }

    /// The report as JUnit XML: one test case per queue, failing when a finding on it
    /// fails the watch, skipped when the queue could not be judged.
    pub fn junit(&self) -> String {
        use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
        let mut suite = TestSuite::new("watch");
        for q in &self.queues {
            let failing: Vec<&WatchFinding> = self
                .findings
                .iter()
                .filter(|f| f.queue == q.name && fails(f, self.strict))
                .collect();
            let status = if let Some(f) = failing.first() {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
                s.set_message(headline(f))
                    .set_description(f.details.clone());
                s
            } else {
                match &q.verdict {
                    QueueVerdict::Unknown(w) | QueueVerdict::Undecided(w) => {
                        let mut s = TestCaseStatus::skipped();
                        s.set_message(w.clone());
                        s
                    }
                    _ => TestCaseStatus::success(),
                }
            };
            suite.add_test_case(TestCase::new(format!("watch/{}", q.name), status));
        }
        let mut r = quick_junit::Report::new("queen-conformance watch");
        r.add_test_suite(suite);
        r.to_string().unwrap_or_default()
    }
}

/// Whether a finding fails the watch.
fn fails(f: &WatchFinding, strict: bool) -> bool {
    f.level == Level::Seed || (strict && f.level == Level::Project)
}

fn headline(f: &WatchFinding) -> String {
    let rules: Vec<&str> = f.rules.iter().map(|r| r.as_str()).collect();
    format!(
        "[{}] {} {}: {}",
        f.level,
        rules.join(", "),
        f.kind,
        f.summary
    )
}

/// One finding as the terminal shows it when it is made: rule, level and kind, the
/// queue, what the model says, the latest exchanges and a curl line to replay the call.
pub(crate) fn render_finding(f: &WatchFinding, paint: Paint) -> String {
    let mut out = String::new();
    let head = headline(f);
    let head = if f.level == Level::Seed {
        paint.red(&head)
    } else {
        paint.yellow(&head)
    };
    let on = if f.queue.is_empty() {
        "a request judged on its own".to_string()
    } else {
        format!("queue {:?}", f.queue)
    };
    let _ = writeln!(out, "✗ {head}\n  on {on}");
    for line in f.details.lines().take(24) {
        let _ = writeln!(out, "    {line}");
    }
    for r in f.exchanges.iter().rev().take(4).rev() {
        let status = r.status.map_or("no answer".to_string(), |s| s.to_string());
        let _ = writeln!(out, "  #{} {} {} -> {status}", r.id, r.method, r.path);
    }
    if !f.curl.is_empty() {
        let _ = writeln!(out, "  {} {}", paint.bold("repro:"), f.curl);
    }
    out
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct FindingLabels {
    rule: String,
    level: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct VerdictLabels {
    verdict: String,
}

/// The counts as Prometheus text, read from the checker at the moment of the scrape.
pub fn metrics_text(online: &Online) -> String {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;
    use prometheus_client::metrics::gauge::Gauge;
    let mut reg = prometheus_client::registry::Registry::with_prefix("queen_watch");
    let (exchanges, checked) = (Counter::<u64>::default(), Counter::<u64>::default());
    exchanges.inc_by(online.counts.exchanges);
    checked.inc_by(online.counts.checked);
    reg.register(
        "exchanges",
        "Exchanges the watcher saw completed",
        exchanges,
    );
    reg.register("checked", "Exchanges the model judged", checked);
    let findings = Family::<FindingLabels, Counter<u64>>::default();
    for f in &online.findings {
        for r in &f.rules {
            let l = FindingLabels {
                rule: r.as_str().to_string(),
                level: f.level.to_string(),
            };
            findings.get_or_create(&l).inc();
        }
    }
    reg.register("findings", "Findings made, by rule and level", findings);
    let queues = Family::<VerdictLabels, Gauge>::default();
    for (_, v, _) in online.verdicts() {
        let verdict = match v {
            QueueVerdict::Checked => "checked",
            QueueVerdict::Unknown(_) => "unknown",
            QueueVerdict::Undecided(_) => "undecided",
            QueueVerdict::Violated(_) => "violated",
        };
        queues
            .get_or_create(&VerdictLabels {
                verdict: verdict.into(),
            })
            .inc();
    }
    reg.register("queues", "Queues seen, by how they are judged", queues);
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &reg);
    out
}

/// Serves `GET /metrics` on `addr` for as long as the process runs.
pub(super) async fn serve_metrics(
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
) -> Result<(), String> {
    use bytes::Bytes;
    use http_body_util::Full;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} (--admin): {e}"))?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let shared = shared.clone();
            let service = hyper::service::service_fn(move |req: hyper::Request<_>| {
                let text = if req.uri().path() == "/metrics" {
                    Some(metrics_text(&shared.checker()))
                } else {
                    None
                };
                async move {
                    let mut r = hyper::Response::new(Full::new(Bytes::from(
                        text.clone().unwrap_or_else(|| "not found\n".into()),
                    )));
                    if text.is_none() {
                        *r.status_mut() = hyper::StatusCode::NOT_FOUND;
                    }
                    Ok::<_, std::convert::Infallible>(r)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service),
            );
        }
    });
    Ok(())
}
