//! Running a suite: the catalog's cases with bounded concurrency (each on its own
//! session with names unique to the run), then the lockstep property run, then the
//! concurrent scenario when asked (`run --concurrency N`: N clients at once, checked for
//! linearizability, drained, invariants checked), then the cases that touch broker-wide
//! state (maintenance), one at a time with nothing else running.

use crate::case::{Capability, Case, Failure};
use crate::catalog;
use crate::concurrent::{self, Scenario};
use crate::exchange::Exchange;
use crate::findings::Seen;
use crate::lockstep::LOCKSTEP_ID;
use crate::lockstep::{self, LockstepOptions, LockstepOutcome};
use crate::progress::Progress;
use crate::select::{Entry, Selection};
use crate::session::Session;
use crate::target::Target;
use crate::transport::{now_ms, transmit};
use queen_reference::wire::HttpRequest;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What to run and how.
#[derive(Clone)]
pub struct RunOptions {
    /// The broker to check.
    pub target: Target,
    /// How the target is described in reports (URL, embedded engine).
    pub target_label: String,
    /// Capabilities excluded: cases needing them are skipped.
    pub without: BTreeSet<Capability>,
    /// The entries to run; the others are left out of the reports.
    pub selection: Selection,
    /// Cases running at once.
    pub jobs: usize,
    /// Time allowed for one case (s).
    pub case_timeout_s: u64,
    /// The lockstep property run, if asked for.
    pub lockstep: Option<LockstepOptions>,
    /// The concurrent scenario (reported as [`CONCURRENT_ID`]), if asked for.
    pub concurrent: Option<concurrent::ScenarioOptions>,
    /// Whether to show a progress bar.
    pub progress: bool,
}

impl RunOptions {
    /// The whole catalog, 12 cases at once, and `lockstep` if given, with no concurrent
    /// scenario and no progress bar: how our own tests and the benchmark run the suite.
    pub fn whole(target: Target, label: &str, lockstep: Option<LockstepOptions>) -> RunOptions {
        RunOptions {
            target,
            target_label: label.to_string(),
            without: BTreeSet::new(),
            selection: Selection::all(),
            jobs: 12,
            case_timeout_s: 60,
            lockstep,
            concurrent: None,
            progress: false,
        }
    }
}

pub use crate::concurrent::CONCURRENT_ID;

/// How a case ended before expectations are applied.
#[derive(Clone, Debug)]
pub enum Status {
    /// Every answer was allowed and every assertion held.
    Passed,
    /// The case failed, and why.
    Failed(Failure),
    /// The case was not run, and why.
    Skipped(String),
}

/// One case's result.
#[derive(Clone)]
pub struct CaseOutcome {
    /// The case run.
    pub case: Case,
    /// How it ended.
    pub status: Status,
    /// Its exchanges with the broker.
    pub transcript: Vec<Exchange>,
    /// Every departure the case met, on its own rules or on others.
    pub findings: Vec<Seen>,
    /// The prefix of the queue names it used.
    pub(crate) prefix: String,
    /// How long it took (ms).
    pub duration_ms: u64,
}

/// Everything a run produced.
#[derive(Clone)]
pub struct RunResults {
    /// The run's id: 8 hex digits, in the queue names it made (`cf<run>c<case>-...`).
    pub run_id: String,
    /// How the target is described in reports.
    pub target_label: String,
    /// When the run started (ms since the Unix epoch).
    pub(crate) started_ms: i64,
    /// How long the run took (ms).
    pub duration_ms: u64,
    /// Each selected case's outcome.
    pub cases: Vec<CaseOutcome>,
    /// The lockstep property run, if it ran.
    pub lockstep: Option<LockstepOutcome>,
    /// The concurrent scenario, if it ran.
    pub concurrent: Option<Scenario>,
    /// The capabilities excluded.
    pub without: BTreeSet<Capability>,
    /// Set when the broker stopped answering: why, and what it received last.
    pub target_down: Option<String>,
    /// Catalog cases the selection left out (not run, not reported).
    pub left_out: usize,
}

/// A fresh run id: 8 hex digits (queue names are `cf<run>c<case>-...`).
pub(crate) fn new_run_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_string()
}

/// Whether the broker answers at all (`GET /health`, not checked).
pub async fn reachable(target: &Target) -> Result<(), String> {
    transmit(target, &HttpRequest::get("/health", &[]))
        .await
        .map(|_| ())
        .map_err(|e| format!("cannot reach {}: {e}", target.url))
}

/// Runs a case; one that misses only a timing bound runs once more, under names of its
/// own, and the second run's outcome stands (a broker that is late is late every time).
async fn run_case(target: Target, case: Case, prefix: String, timeout_s: u64) -> CaseOutcome {
    let first = run_case_once(target.clone(), case.clone(), prefix.clone(), timeout_s).await;
    let Status::Failed(Failure::Late { message: was, .. }) = &first.status else {
        return first;
    };
    let was = was.clone();
    let mut again = run_case_once(target, case, format!("{prefix}r"), timeout_s).await;
    if let Status::Failed(Failure::Late { message, .. }) = &mut again.status {
        *message = format!("{message} (and in its first run: {was})");
    }
    again
}

async fn run_case_once(
    mut target: Target,
    case: Case,
    prefix: String,
    timeout_s: u64,
) -> CaseOutcome {
    if case.one_broker {
        target.pin = Some(0);
    }
    let t0 = Instant::now();
    let mut s = Session::new(&target, prefix.clone()).labelled(case.id);
    let result = tokio::time::timeout(Duration::from_secs(timeout_s), (case.run)(&mut s)).await;
    let (transcript, findings) = s.into_parts();
    let own = own_findings(&case, &findings, &target);
    let status = match result {
        Ok(Ok(())) if own.is_empty() => Status::Passed,
        // Every answer was allowed, but only with findings on the case's own rules.
        Ok(Ok(())) => Status::Failed(Failure::Findings(own)),
        Ok(Err(f @ (Failure::Assertion { .. } | Failure::Late { .. }))) => {
            Status::Failed(cause_of(f, &findings))
        }
        Ok(Err(f)) => Status::Failed(f),
        Err(_) => Status::Failed(Failure::Timeout {
            secs: timeout_s,
            waiting: target
                .health
                .waiting(case.id)
                .iter()
                .map(|r| crate::exchange::curl_one(&target.url, r))
                .collect(),
        }),
    };
    CaseOutcome {
        case,
        status,
        transcript,
        findings,
        prefix,
        duration_ms: t0.elapsed().as_millis() as u64,
    }
}

/// The findings that decide a case's verdict: on its own rules, not accepted, not OPEN.
/// Findings on other rules are reported under those rules, not against this case.
fn own_findings(
    case: &Case,
    seen: &[Seen],
    target: &Target,
) -> Vec<queen_reference::finding::Finding> {
    seen.iter()
        .map(|s| &s.finding)
        .filter(|f| case.rules.contains(&f.rule) && f.level != crate::rules::Level::Open)
        .filter(|f| !target.settings.accept.iter().any(|a| a.covers(f)))
        .cloned()
        .collect()
}

/// A case that stopped on an answer it could not read (a bug of the case, shown as its
/// failure rather than ending the run).
fn panicked(case: &Case, why: Box<dyn std::any::Any + Send>) -> CaseOutcome {
    let why = why
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| why.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    CaseOutcome {
        status: Status::Failed(Failure::Assertion {
            message: format!("the case stopped on an answer it could not read: {why}"),
            rules: vec![],
        }),
        ..cut_short(case, "")
    }
}

/// A case's own assertion that failed after the broker did less than asked (a route it
/// lacks, a pop that claimed less than it could) or after a diagnosed cause: the case saw
/// what the protocol does not provide, so its assertion is no evidence against its own
/// rules, and the failure is that departure's. Any other assertion stands.
fn cause_of(f: Failure, seen: &[Seen]) -> Failure {
    use queen_reference::finding::Kind;
    let causes: Vec<_> = seen
        .iter()
        .map(|s| s.finding.clone())
        .filter(|f| matches!(f.kind, Kind::Claim | Kind::RouteMissing | Kind::Cause))
        .collect();
    if causes.is_empty() {
        f
    } else {
        Failure::Findings(causes)
    }
}

/// A case that did not run to its end because the broker had stopped answering.
fn cut_short(case: &Case, why: &str) -> CaseOutcome {
    CaseOutcome {
        case: case.clone(),
        status: Status::Failed(Failure::TargetDown(why.to_string())),
        transcript: vec![],
        findings: vec![],
        prefix: String::new(),
        duration_ms: 0,
    }
}

/// Runs the suite against `opts.target`.
pub async fn run(opts: &RunOptions) -> RunResults {
    let run_id = new_run_id();
    let started_ms = now_ms();
    let t0 = Instant::now();
    let progress = Arc::new(Progress::new(opts.progress));
    let catalog = catalog::all();
    let catalog_len = catalog.len();
    let serves_management = crate::probe::serves_management(&opts.target).await;
    let all: Vec<Case> = catalog
        .into_iter()
        .filter(|c| opts.selection.covers(&Entry::case(c)))
        .collect();
    let mut outcomes: Vec<Option<CaseOutcome>> = vec![None; all.len()];
    let mut concurrent = Vec::new();
    let mut alone = Vec::new();
    for (i, case) in all.iter().enumerate() {
        if let Some(why) = skip_reason(case, opts, serves_management) {
            outcomes[i] = Some(CaseOutcome {
                case: case.clone(),
                status: Status::Skipped(why),
                transcript: vec![],
                findings: vec![],
                prefix: String::new(),
                duration_ms: 0,
            });
        } else if case.exclusive {
            alone.push(i);
        } else {
            concurrent.push(i);
        }
    }
    let mut cases = CaseRun {
        opts,
        run_id: &run_id,
        all: &all,
        outcomes,
        progress: &progress,
        done: 0,
        total: (concurrent.len() + alone.len()) as u64,
    };
    cases.run_shared(&concurrent).await;
    let lockstep = lockstep_run(opts, &run_id, &progress, serves_management).await;
    let concurrent = concurrent_scenario(opts, &progress).await;
    cases.run_alone(&alone).await;
    progress.finish();
    let mut outcomes = cases.outcomes;
    let target_down = opts.target.health.down();
    if let Some(why) = &target_down {
        for (o, case) in outcomes.iter_mut().zip(&all) {
            if o.is_none() {
                *o = Some(cut_short(case, why));
            }
        }
    }
    RunResults {
        run_id,
        target_label: opts.target_label.clone(),
        started_ms,
        duration_ms: t0.elapsed().as_millis() as u64,
        cases: outcomes
            .into_iter()
            .map(|o| o.expect("every case ran or was skipped"))
            .collect(),
        lockstep,
        concurrent,
        without: opts.without.clone(),
        target_down,
        left_out: catalog_len - all.len(),
    }
}

/// Why `case` cannot run against this target (a capability it lacks or the suite
/// cannot use there), if it cannot.
fn skip_reason(case: &Case, opts: &RunOptions, serves_management: bool) -> Option<String> {
    let missing: Vec<_> = case
        .capabilities()
        .filter(|c| opts.without.contains(c))
        .collect();
    let no_db = opts.target.database.is_none()
        && case
            .capabilities()
            .any(|c| c == Capability::DatabaseControl);
    let no_tokens =
        opts.target.tokens.is_none() && case.capabilities().any(|c| c == Capability::Auth);
    let no_management =
        !serves_management && case.capabilities().any(|c| c == Capability::Management);
    if missing.is_empty() && !no_db && !no_tokens && !no_management {
        return None;
    }
    Some(if no_management {
        "needs management: the broker answered 404 to GET /api/v1/resources/overview, \
         so it has no management routes (PROTOCOL.md section 17)"
            .to_string()
    } else if missing.is_empty() && no_tokens {
        "needs auth: a broker with authentication on, and its tokens for the suite \
         (--jwt-secret, or --token-admin, --token-rw and --token-ro)"
            .to_string()
    } else if missing.is_empty() {
        "needs database-control: only when queen-conformance starts the broker itself \
         on its own PostgreSQL cluster (no --target, no DATABASE_URL)"
            .to_string()
    } else {
        format!(
            "--without {}",
            missing
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(",")
        )
    })
}

/// The named cases of one run as they finish: shared by the phase that runs them side
/// by side and the one that runs the broker-wide switches alone.
struct CaseRun<'a> {
    opts: &'a RunOptions,
    run_id: &'a str,
    all: &'a [Case],
    outcomes: Vec<Option<CaseOutcome>>,
    progress: &'a Progress,
    done: u64,
    total: u64,
}

impl CaseRun<'_> {
    /// The names case `i` creates start with this, so cases never share a queue.
    fn prefix(&self, i: usize) -> String {
        format!("cf{}c{i:03}", self.run_id)
    }

    /// Records case `i`'s outcome and moves the progress bar.
    fn finished(&mut self, i: usize, o: CaseOutcome) {
        self.outcomes[i] = Some(o);
        self.done += 1;
        self.progress.update("cases", self.done, self.total);
    }

    /// Cases that share the broker peacefully, at most `jobs` at a time; once the broker
    /// stops answering, those still running are cut short.
    async fn run_shared(&mut self, concurrent: &[usize]) {
        let opts = self.opts;
        let sem = Arc::new(tokio::sync::Semaphore::new(opts.jobs.max(1)));
        let mut set = tokio::task::JoinSet::new();
        let mut task_case = std::collections::HashMap::new();
        for &i in concurrent {
            let (target, case, p, sem) = (
                opts.target.clone(),
                self.all[i].clone(),
                self.prefix(i),
                sem.clone(),
            );
            let timeout = opts.case_timeout_s;
            let task = set.spawn(async move {
                let _permit = sem.acquire_owned().await.expect("semaphore open");
                (i, run_case(target, case, p, timeout).await)
            });
            task_case.insert(task.id(), i);
        }
        self.progress.update("cases", 0, self.total);
        while let Some(r) = set.join_next().await {
            let (i, o) = match r {
                Ok(done) => done,
                Err(e) if e.is_panic() => {
                    let i = task_case[&e.id()];
                    (i, panicked(&self.all[i], e.into_panic()))
                }
                Err(_) => continue, // aborted below, once the broker stopped answering
            };
            self.finished(i, o);
            if opts.target.health.down().is_some() {
                set.abort_all();
            }
        }
    }

    /// Broker-wide switches, one at a time with nothing else running, until the broker
    /// stops answering.
    async fn run_alone(&mut self, alone: &[usize]) {
        for &i in alone {
            if self.opts.target.health.down().is_some() {
                break;
            }
            let task = tokio::spawn(run_case(
                self.opts.target.clone(),
                self.all[i].clone(),
                self.prefix(i),
                self.opts.case_timeout_s,
            ));
            let o = match task.await {
                Ok(o) => o,
                Err(e) => panicked(&self.all[i], e.into_panic()),
            };
            self.finished(i, o);
        }
    }
}

/// The lockstep property run, when selected and the broker still answers.
async fn lockstep_run(
    opts: &RunOptions,
    run_id: &str,
    progress: &Arc<Progress>,
    serves_management: bool,
) -> Option<LockstepOutcome> {
    let l = opts.lockstep.as_ref()?;
    if opts.target.health.down().is_some()
        || l.cases == 0
        || !opts.selection.covers(&Entry::named(LOCKSTEP_ID))
    {
        return None;
    }
    let p = progress.clone();
    let tick: lockstep::Tick = Arc::new(move |d, t| p.update("lockstep sequences", d, t));
    let mut l = l.clone();
    if !serves_management {
        // Nor does the lockstep run send management requests.
        l.without.insert(Capability::Management);
    }
    Some(lockstep::run(&opts.target, run_id, &l, Some(tick)).await)
}

/// N clients at once on queues of their own, then the drain, when selected and the
/// broker still answers.
async fn concurrent_scenario(opts: &RunOptions, progress: &Progress) -> Option<Scenario> {
    let c = opts.concurrent.as_ref()?;
    if opts.target.health.down().is_some() || !opts.selection.covers(&Entry::named(CONCURRENT_ID)) {
        return None;
    }
    progress.update("concurrent scenario", 0, 1);
    let s =
        concurrent::run_scenario_within(&opts.target, &c.workload, c.budget, c.search_limit).await;
    progress.update("concurrent scenario", 1, 1);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{CaseFn, CaseResult};
    use crate::failure::late;
    use crate::rules::{Level, POP_11};
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static LATE_ONCE: AtomicUsize = AtomicUsize::new(0);
    static LATE_ALWAYS: AtomicUsize = AtomicUsize::new(0);

    /// Late in its first run only, as a stalled machine makes a conforming broker.
    fn late_once(
        _: &mut Session,
    ) -> std::pin::Pin<Box<dyn Future<Output = CaseResult> + Send + '_>> {
        Box::pin(async {
            match LATE_ONCE.fetch_add(1, Ordering::SeqCst) {
                0 => Err(late("woken after 900 ms", &[POP_11])),
                _ => Ok(()),
            }
        })
    }

    /// Late every time, as a broker that does not wake parked pops.
    fn late_always(
        _: &mut Session,
    ) -> std::pin::Pin<Box<dyn Future<Output = CaseResult> + Send + '_>> {
        Box::pin(async {
            let n = LATE_ALWAYS.fetch_add(1, Ordering::SeqCst);
            Err(late(format!("woken after {} ms", 900 + n), &[POP_11]))
        })
    }

    fn outcome(run: CaseFn) -> CaseOutcome {
        let case = Case::new(
            "pop-11/t",
            &[POP_11],
            Level::Seed,
            Capability::LongPoll,
            run,
        );
        let target = Target::new("http://127.0.0.1:9", Default::default());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run_case(target, case, "cfx".into(), 5))
    }

    #[test]
    fn a_case_late_once_runs_again_and_its_second_run_stands() {
        let o = outcome(late_once);
        assert!(matches!(o.status, Status::Passed), "{:?}", o.status);
        assert_eq!(LATE_ONCE.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_case_late_twice_fails_with_both_times() {
        let o = outcome(late_always);
        let Status::Failed(f @ Failure::Late { .. }) = &o.status else {
            panic!("{:?}", o.status)
        };
        assert_eq!(f.kind(), "timing");
        assert_eq!(f.rules(), [POP_11]);
        assert_eq!(
            f.headline(),
            "woken after 901 ms (and in its first run: woken after 900 ms)"
        );
        assert_eq!(LATE_ALWAYS.load(Ordering::SeqCst), 2);
    }
}
