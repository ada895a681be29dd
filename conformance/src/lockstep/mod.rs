//! Lockstep property runs: proptest generates operation sequences, each is sent to the
//! broker with fresh queue names and every answer is checked against the model's
//! allowed answers as it arrives (ids are bound as they are learnt). On the first
//! divergence proptest shrinks the sequence — every re-run again with fresh names — and
//! the minimal one is printed as a curl script and a Rust test, with the model's allowed
//! answers beside the actual one and the rule ids involved, and saved to disk.
//!
//! A run is reproducible from its seed (`--seed`), its size (`--cases`, `--steps`) and its
//! number of workers (parallel proptest runners with seeds derived from the run's seed).

pub mod coverage;
pub mod repro;

pub use coverage::Coverage;
pub use queen_reference::sequence::{Pop, Route, Step};
pub use queen_reference::wire::RouteId;

use crate::calls::sleep_ms;
use crate::case::{Capability, Failure};
use crate::exchange::Exchange;
use crate::findings::{Example, Seen};
use crate::rules::Level;
use crate::session::Session;
use crate::target::{CheckSettings, Target};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use queen_reference::finding::{Finding, Kind};
use queen_reference::sequence::{self as gen, Delivered, Names, Optional};
use queen_reference::wire::PopResponse;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The id under which the property run is reported.
pub const LOCKSTEP_ID: &str = "lockstep/property-run";

/// How big a lockstep run is and where its counterexamples go.
#[derive(Clone, Debug)]
pub struct LockstepOptions {
    /// The run's seed; each worker's seed derives from it.
    pub seed: u64,
    /// Sequences generated (before shrinking), across all workers.
    pub cases: u32,
    /// Longest sequence.
    pub steps: u32,
    /// Parallel runners.
    pub workers: usize,
    /// Capabilities the broker lacks: their operations are never generated.
    pub without: BTreeSet<Capability>,
    /// Where failing seeds and their counterexamples are saved.
    pub failures_dir: Option<PathBuf>,
    /// Time allowed for shrinking.
    pub max_shrink_secs: u32,
}

impl LockstepOptions {
    /// `cases` sequences of up to `steps` steps from `seed`, on 4 workers, with every
    /// capability, counterexamples saved in `failures_dir` after at most a minute of
    /// shrinking.
    pub fn sized(seed: u64, cases: u32, steps: u32, failures_dir: PathBuf) -> LockstepOptions {
        LockstepOptions {
            seed,
            cases,
            steps,
            workers: 4,
            without: BTreeSet::new(),
            failures_dir: Some(failures_dir),
            max_shrink_secs: 60,
        }
    }
}

/// A minimal failing sequence.
#[derive(Clone, Debug)]
pub struct Counterexample {
    /// The run's seed.
    pub seed: u64,
    /// The worker that found it.
    pub worker: usize,
    /// How many steps the failing sequence had before shrinking.
    pub(crate) first_len: usize,
    /// The shrunk sequence.
    pub steps: Vec<Step>,
    /// Its exchanges with the broker, up to the failure.
    pub transcript: Vec<Exchange>,
    /// Why it fails.
    pub failure: Failure,
    /// The sequence as a curl script.
    pub curl: String,
    /// The sequence as a Rust test.
    pub rust: String,
    /// Files the counterexample was saved to.
    pub(crate) saved: Vec<PathBuf>,
}

/// What a lockstep run found.
#[derive(Clone, Debug, Default)]
pub struct LockstepOutcome {
    /// The run's seed.
    pub seed: u64,
    /// Parallel runners.
    pub workers: usize,
    /// Sequences asked for.
    pub cases: u32,
    /// Longest sequence asked for.
    pub steps: u32,
    /// Sequences run.
    pub sequences: u64,
    /// Exchanges with the broker over all sequences.
    pub exchanges: u64,
    /// Sequences the model could not decide (cut short, not failed).
    pub inconclusive: u64,
    /// How often each operation was called and each outcome reached.
    pub coverage: Coverage,
    /// The minimal failing sequence, when one failed.
    pub counterexample: Option<Counterexample>,
    /// Why the run could not go on, when it stopped early.
    pub error: Option<String>,
    /// How long the run took (ms).
    pub duration_ms: u64,
    /// Departures met in sequences (answer-only ones, PROJECT points decided otherwise),
    /// each with the sequence up to where it was first seen; at most
    /// [`MAX_FINDINGS_LISTED`] distinct ones are kept.
    pub findings: Vec<Example>,
}

/// How many distinct findings a lockstep run lists.
pub const MAX_FINDINGS_LISTED: usize = 32;

/// How one sequence ended.
pub(crate) enum SeqResult {
    /// Every answer allowed; with the findings met on the way.
    Pass(Vec<Example>),
    /// The model could not decide: the sequence is cut short, not failed.
    Inconclusive,
    /// An answer was not allowed, or an assertion failed.
    Fail(Failure),
}

/// Runs one sequence on a fresh session; returns how it ended and what was exchanged.
async fn run_sequence(
    target: &Target,
    prefix: String,
    steps: &[Step],
    mut cov: Option<&mut Coverage>,
) -> (SeqResult, Vec<Exchange>) {
    let names = Names {
        prefix: prefix.clone(),
    };
    let mut s = Session::new(target, prefix.clone()).labelled("lockstep/property-run");
    let mut delivered: Vec<Delivered> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut pops = 0u32;
    for step in steps {
        if let Some(c) = cov.as_deref_mut() {
            c.op(step.kind());
        }
        if let Step::Sleep(ms) = step {
            sleep_ms(*ms as u64).await;
            continue;
        }
        let Some(req) = gen::request(step, &names, &delivered) else {
            continue;
        };
        match s.send(req).await {
            Ok(resp) => {
                if let Some(c) = cov.as_deref_mut() {
                    let x = s.transcript().last().expect("just sent");
                    c.observe(
                        &x.request,
                        &resp,
                        s.checker().worlds().first(),
                        &mut seen,
                        s.worlds(),
                    );
                }
                if let (Step::Pop(Pop { group, .. }), 200) = (step, resp.status) {
                    if let Some(p) = resp
                        .body
                        .and_then(|b| serde_json::from_value::<PopResponse>(b).ok())
                    {
                        pops += 1;
                        delivered.extend(p.messages.into_iter().map(|message| Delivered {
                            message,
                            group: *group,
                            pop: pops,
                        }));
                    }
                }
                if delivered.len() > 64 {
                    delivered.drain(..delivered.len() - 64);
                }
            }
            Err(Failure::Inconclusive { .. }) => {
                return (SeqResult::Inconclusive, s.into_transcript())
            }
            Err(f) => return (SeqResult::Fail(f), s.into_transcript()),
        }
    }
    let (transcript, seen) = s.into_parts();
    (
        SeqResult::Pass(Example::all(
            &seen,
            &transcript,
            &prefix,
            "lockstep/property-run",
        )),
        transcript,
    )
}

/// Replays a step list against a broker at `url` (default check settings): the entry
/// point of the Rust tests printed for counterexamples.
pub async fn replay(url: &str, steps: &[Step]) -> Result<(), String> {
    let target = Target::new(url, CheckSettings::default());
    let prefix = format!("rp{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    match run_sequence(&target, prefix.clone(), steps, None).await {
        (SeqResult::Pass(_), _) | (SeqResult::Inconclusive, _) => Ok(()),
        (SeqResult::Fail(f), t) => Err(format!(
            "{}\n{}",
            f.details(),
            repro::curl_script(&t, &prefix, Some(&f))
        )),
    }
}

struct Shared {
    coverage: Mutex<Coverage>,
    findings: Mutex<Vec<Example>>,
    counter: AtomicU64,
    sequences: AtomicU64,
    exchanges: AtomicU64,
    inconclusive: AtomicU64,
    stop: AtomicBool,
    done: AtomicU64,
}

impl Shared {
    /// Counts a sequence run to its end (not a shrinking rerun): its coverage, its
    /// exchanges, and one more tick of the progress bar.
    fn count_sequence(&self, cov: &Coverage, exchanges: usize, tick: Option<&Tick>, total: u64) {
        self.coverage.lock().expect("coverage").merge(cov);
        self.sequences.fetch_add(1, Ordering::SeqCst);
        self.exchanges.fetch_add(exchanges as u64, Ordering::SeqCst);
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(t) = tick {
            t(done, total);
        }
    }

    /// Keeps the findings of a passing sequence that no sequence met before, up to
    /// [`MAX_FINDINGS_LISTED`].
    fn note_findings(&self, found: Vec<Example>) {
        let mut all = self.findings.lock().expect("findings");
        for e in found {
            let known = all
                .iter()
                .any(|x| x.seen.finding.key() == e.seen.finding.key());
            if !known && all.len() < MAX_FINDINGS_LISTED {
                all.push(e);
            }
        }
    }
}

/// A sequence that stopped on a PROJECT point, kept as a finding of the run (its rule,
/// at PROJECT level) with the transcript that reproduces it.
fn note_project_stop(shared: &Shared, f: &Failure, transcript: &[Exchange]) {
    let rule = f
        .rules()
        .first()
        .copied()
        .unwrap_or(crate::rules::ACK_STEP_3);
    let finding = Finding::new(rule, Kind::State, "a sequence stopped on a PROJECT point")
        .example(f.headline());
    let seen = Seen {
        finding,
        step: transcript.len().saturating_sub(1),
        expected: None,
    };
    let prefix = transcript_prefix(transcript);
    let mut all = shared.findings.lock().expect("findings");
    let known = all
        .iter()
        .any(|x| x.seen.finding.key() == seen.finding.key());
    if !known && all.len() < MAX_FINDINGS_LISTED {
        all.extend(Example::all(&[seen], transcript, &prefix, LOCKSTEP_ID));
    }
}

/// Called after each generated (not shrinking) sequence with (done, total).
pub type Tick = Arc<dyn Fn(u64, u64) + Send + Sync>;

fn worker_seed(seed: u64, worker: usize) -> [u8; 32] {
    let mut out = [0u8; 32];
    let mut x = seed ^ (worker as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in out.chunks_mut(8) {
        // splitmix64
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out
}

/// The capability a broker needs for an optional kind of step.
fn capability_of(o: Optional) -> Capability {
    match o {
        Optional::LeaseExtend => Capability::LeaseExtend,
        Optional::Configure => Capability::Configure,
        Optional::DeadLetter => Capability::DeadLetter,
        Optional::Transactions => Capability::Transactions,
        Optional::Management | Optional::ManagementWrites | Optional::WholeBrokerReads => {
            Capability::Management
        }
    }
}

/// Runs the lockstep property check.
pub async fn run(
    target: &Target,
    run_id: &str,
    opts: &LockstepOptions,
    tick: Option<Tick>,
) -> LockstepOutcome {
    let t0 = std::time::Instant::now();
    let workers = opts.workers.max(1).min(opts.cases.max(1) as usize);
    let shared = Arc::new(Shared {
        coverage: Mutex::new(Coverage::default()),
        findings: Mutex::new(Vec::new()),
        counter: AtomicU64::new(0),
        sequences: AtomicU64::new(0),
        exchanges: AtomicU64::new(0),
        inconclusive: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        done: AtomicU64::new(0),
    });
    let mut handles = Vec::new();
    for w in 0..workers {
        let cases =
            opts.cases / workers as u32 + u32::from((w as u32) < opts.cases % workers as u32);
        let (target, opts, shared, tick) =
            (target.clone(), opts.clone(), shared.clone(), tick.clone());
        let run_id = run_id.to_string();
        let handle = tokio::runtime::Handle::current();
        handles.push(tokio::task::spawn_blocking(move || {
            worker(handle, &target, &run_id, &opts, w, cases, &shared, tick)
        }));
    }
    let mut out = LockstepOutcome {
        seed: opts.seed,
        workers,
        cases: opts.cases,
        steps: opts.steps,
        ..LockstepOutcome::default()
    };
    for h in handles {
        match h.await {
            Ok(Ok(Some(c))) if out.counterexample.is_none() => out.counterexample = Some(c),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => out.error = Some(e),
            Err(e) => out.error = Some(format!("a lockstep worker panicked: {e}")),
        }
    }
    out.coverage = shared.coverage.lock().expect("coverage").clone();
    out.findings = shared.findings.lock().expect("findings").clone();
    if let Some(why) = target.health.down() {
        out.error = Some(why);
    }
    out.sequences = shared.sequences.load(Ordering::SeqCst);
    out.exchanges = shared.exchanges.load(Ordering::SeqCst);
    out.inconclusive = shared.inconclusive.load(Ordering::SeqCst);
    if let (Some(c), Some(dir)) = (out.counterexample.as_mut(), &opts.failures_dir) {
        c.saved = save(dir, c, opts, &target.settings).unwrap_or_default();
    }
    out.duration_ms = t0.elapsed().as_millis() as u64;
    out
}

#[allow(clippy::too_many_arguments)]
fn worker(
    handle: tokio::runtime::Handle,
    target: &Target,
    run_id: &str,
    opts: &LockstepOptions,
    w: usize,
    cases: u32,
    shared: &Shared,
    tick: Option<Tick>,
) -> Result<Option<Counterexample>, String> {
    if cases == 0 {
        return Ok(None);
    }
    let mut runner = test_runner(opts, w, cases);
    let without = opts.without.clone();
    let allowed = move |o: Optional| {
        // Other sequences run on the same broker, so no read of the whole broker.
        o != Optional::WholeBrokerReads && !without.contains(&capability_of(o))
    };
    let strategy = proptest::collection::vec(gen::step(&allowed), 1..=opts.steps.max(1) as usize);
    let search = Search::default();
    let total = opts.cases as u64;
    let result = runner.run(&strategy, |steps| {
        let shrinking = search.failed_here.get();
        if shared.stop.load(Ordering::SeqCst) && !shrinking {
            return Ok(()); // another worker found a counterexample
        }
        let prefix = format!(
            "ls{run_id}s{}",
            shared.counter.fetch_add(1, Ordering::SeqCst)
        );
        let mut cov = Coverage::default();
        let (res, transcript) =
            handle.block_on(run_sequence(target, prefix, &steps, Some(&mut cov)));
        if !shrinking {
            shared.count_sequence(&cov, transcript.len(), tick.as_ref(), total);
        }
        search.outcome(res, steps, transcript, target, shared)
    });
    match result {
        Ok(()) => Ok(None),
        Err(TestError::Abort(why)) => Err(format!("lockstep run aborted: {why}")),
        Err(TestError::Fail(_, minimal)) => {
            let (steps, transcript, failure) = search
                .last
                .lock()
                .expect("last")
                .take()
                .ok_or("no failing run was recorded")?;
            // The last failing run is the minimal one proptest reports.
            debug_assert_eq!(steps, minimal);
            Ok(Some(counterexample(
                opts,
                w,
                search.first_len.get(),
                (steps, transcript, failure),
            )))
        }
    }
}

/// A worker's search for a counterexample: whether it found one (so that proptest's
/// reruns are shrinking), how long the first was, and the last failing run.
#[derive(Default)]
struct Search {
    failed_here: std::cell::Cell<bool>,
    first_len: std::cell::Cell<usize>,
    last: Mutex<Option<FailingRun>>,
}

/// A failing sequence with its transcript and why it failed.
type FailingRun = (Vec<Step>, Vec<Exchange>, Failure);

impl Search {
    /// What one sequence's result means to proptest: an error only for a counterexample
    /// (which it then shrinks); findings and stops are noted unless shrinking.
    fn outcome(
        &self,
        res: SeqResult,
        steps: Vec<Step>,
        transcript: Vec<Exchange>,
        target: &Target,
        shared: &Shared,
    ) -> Result<(), TestCaseError> {
        let shrinking = self.failed_here.get();
        match res {
            SeqResult::Pass(found) => {
                if !shrinking {
                    shared.note_findings(found);
                }
                Ok(())
            }
            // A broker that stopped answering is not a counterexample to shrink.
            SeqResult::Fail(Failure::TargetDown(_)) => {
                shared.stop.store(true, Ordering::SeqCst);
                Ok(())
            }
            SeqResult::Inconclusive => {
                shared.inconclusive.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            // Without --strict a sequence that ends on a PROJECT point is a finding, not
            // a counterexample: the run goes on to the SEED points other sequences reach.
            SeqResult::Fail(f)
                if !target.settings.strict_project && f.level(Level::Seed) == Level::Project =>
            {
                if !shrinking {
                    note_project_stop(shared, &f, &transcript);
                }
                Ok(())
            }
            SeqResult::Fail(f) => {
                if !shrinking {
                    self.failed_here.set(true);
                    self.first_len.set(steps.len());
                    shared.stop.store(true, Ordering::SeqCst);
                }
                let headline = f.headline();
                *self.last.lock().expect("last") = Some((steps, transcript, f));
                Err(TestCaseError::fail(headline))
            }
        }
    }
}

/// A worker's proptest runner: its share of the cases, seeded from the run's seed and
/// the worker's index so that `--seed` replays it.
fn test_runner(opts: &LockstepOptions, w: usize, cases: u32) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 4096,
        max_shrink_time: opts.max_shrink_secs.saturating_mul(1000),
        ..Config::default()
    };
    TestRunner::new_with_rng(
        config,
        TestRng::from_seed(RngAlgorithm::ChaCha, &worker_seed(opts.seed, w)),
    )
}

/// The minimal failing sequence of worker `w` (shrunk from `first_len` steps) with its
/// curl script and Rust test.
fn counterexample(
    opts: &LockstepOptions,
    w: usize,
    first_len: usize,
    (steps, transcript, failure): FailingRun,
) -> Counterexample {
    let prefix = transcript_prefix(&transcript);
    let curl = repro::curl_script(&transcript, &prefix, Some(&failure));
    let rust = repro::rust_test(
        &steps,
        &format!("lockstep_seed_{}_worker_{w}", opts.seed),
        &format!(
            "Counterexample of queen-conformance (seed {}, worker {w}): {} steps, shrunk from {}. {}",
            opts.seed,
            steps.len(),
            first_len,
            failure.headline()
        ),
    );
    Counterexample {
        seed: opts.seed,
        worker: w,
        first_len,
        steps,
        transcript,
        failure,
        curl,
        rust,
        saved: vec![],
    }
}

/// The name prefix a lockstep transcript used (`ls<run>s<n>`), read from its first path
/// or body.
fn transcript_prefix(t: &[Exchange]) -> String {
    for x in t {
        let hay = format!(
            "{} {} {:?}",
            x.request.path,
            String::from_utf8_lossy(&x.request.body),
            x.request.query
        );
        if let Some(i) = hay.find("ls") {
            let p: String = hay[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric())
                .collect();
            if p.contains('s') && p.len() > 3 {
                return p;
            }
        }
    }
    String::new()
}

/// The command that runs the same sequences under the same judgement: the seed and
/// size, and every flag that changes what the checker allows.
fn reproduce(opts: &LockstepOptions, settings: &crate::target::CheckSettings) -> String {
    let mut line = format!(
        "queen-conformance run --only lockstep --seed {} --cases {} --steps {} --lockstep-workers {}",
        opts.seed, opts.cases, opts.steps, opts.workers
    );
    if settings.strict_project {
        line.push_str(" --strict");
    }
    if !settings.keep_going {
        line.push_str(" --no-keep-going");
    }
    for c in &opts.without {
        line.push_str(&format!(" --without {c}"));
    }
    for a in &settings.accept {
        line.push_str(&format!(" --accept {a}"));
    }
    line.push_str(&format!(" --skew-ms {}", settings.skew_ms));
    line
}

/// Saves the counterexample: a summary, the curl script and the Rust test.
fn save(
    dir: &std::path::Path,
    c: &Counterexample,
    opts: &LockstepOptions,
    settings: &crate::target::CheckSettings,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let stem = format!("lockstep-seed{}-w{}", c.seed, c.worker);
    let txt = dir.join(format!("{stem}.txt"));
    let sh = dir.join(format!("{stem}.sh"));
    let rs = dir.join(format!("{stem}.rs"));
    let mut summary = format!(
        "queen-conformance lockstep counterexample\nreproduce the run: {}\n\n{}\n\nminimal sequence ({} steps, shrunk from {}):\n",
        reproduce(opts, settings), c.failure.details(), c.steps.len(), c.first_len
    );
    for s in &c.steps {
        summary.push_str(&format!("  {}\n", s.to_rust()));
    }
    std::fs::write(&txt, summary)?;
    std::fs::write(&sh, &c.curl)?;
    std::fs::write(&rs, &c.rust)?;
    Ok(vec![txt, sh, rs])
}
