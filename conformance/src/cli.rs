//! The command line: `queen-conformance run` (against `--target URL`, or our own server
//! in-process; `--concurrency N` adds the concurrent scenario), `list` (the catalog) and
//! `rules` (rule ids with their cases). Exit status 0 when the run passes, 1 when the
//! broker departs from the protocol, 2 when the suite could not run (bad arguments, no
//! answer, or a target that does not look like a Queen broker), 3 when the broker
//! stopped answering during the run.

use crate::case::Capability;
use crate::catalog;
use crate::expect;
use crate::lockstep::LockstepOptions;
use crate::report::{self, Report};
use crate::rules::RULES;
use crate::runner::{self, RunOptions};
use crate::select::{Entry, Selection};
use crate::target::{CheckSettings, Target};
use clap::{Args, Parser, Subcommand};
use queen_reference::finding::Accept;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// RET-3: how late our embedded server's retention job may remove a message (it runs
/// every 200 ms), the suite's `--retention-interval-ms` when it starts that server.
const EMBEDDED_RETENTION_LAG_MS: i64 = 1_000;
#[derive(Debug, Parser)]
#[command(
    name = "queen-conformance",
    version = crate::version::LONG.as_str(),
    about = "Conformance suite for Queen-compatible brokers, checked against the reference model"
)]
/// The command line of the `queen-conformance` binary.
pub struct Cli {
    #[command(subcommand)]
    /// The subcommand to run.
    pub command: Command,
}

#[derive(Debug, Subcommand)]
/// The subcommands of `queen-conformance`.
pub enum Command {
    /// Run the suite.
    // Every flag's help on its own line under every heading, as the longest ones need.
    #[command(next_line_help = true)]
    Run(Box<RunArgs>),
    /// List the cases with their rules, level and capability.
    List {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the rule ids of PROTOCOL.md with their level and the cases that check them.
    Rules {
        /// As JSON: each rule's id, level, title and the ids of its cases.
        #[arg(long)]
        json: bool,
    },
    /// Print the JSON Schema of the `run --json` report (as `spec/report.schema.json`).
    ReportSchema,
    /// Print the spec the suite checks (`spec/PROTOCOL.md`, embedded at build time).
    Spec,
    /// Fault scenarios: the concurrent workload against a PostgreSQL cluster and
    /// queen-server processes this command starts, while PostgreSQL is paused or
    /// killed, a server process is killed, ... (see `docs/broker-authors.md`).
    #[cfg(feature = "embedded")]
    Faults(Box<FaultsArgs>),
    /// Starts a deployment like the fault scenarios' and keeps it until Ctrl-C: a
    /// PostgreSQL primary (and a streaming standby), and several queen-server
    /// processes on it; prints their URLs, for `run --target URL1,URL2`.
    #[cfg(feature = "embedded")]
    Cluster(ClusterArgs),
    /// Checks a recorded concurrent history again: the `.json` a failing round of
    /// `run --concurrency` or `faults` wrote. Prints each queue's verdict with the model
    /// steps and time its search took; exit status 0 when every queue is linearizable.
    Recheck(RecheckArgs),
    /// A proxy that checks real traffic: point any client at --listen instead of the
    /// broker; every exchange is forwarded unchanged and judged by the model, per queue,
    /// as it completes. Findings print as they are made; Ctrl-C or SIGTERM writes the
    /// reports; exit status 0 unless a finding fails the watch (SEED, or PROJECT with
    /// --strict).
    Watch(Box<WatchArgs>),
    /// Checks a recorded history the way `watch` checks live traffic: the JSON lines
    /// `watch --record FILE` wrote, or a HAR file. Queues are taken as new when the
    /// history starts unless the recording says they existed.
    Check(Box<HistoryCheckArgs>),
    /// Runs our server in this process, as `queen-server` would (the fault scenarios
    /// start it this way; arguments and environment are queen-server's).
    #[cfg(feature = "embedded")]
    #[command(hide = true)]
    Serve {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, help = None)]
        /// The server's own command-line arguments, passed through.
        args: Vec<String>,
    },
}

#[cfg(feature = "embedded")]
#[derive(Debug, Args, Clone)]
/// The options of `faults`.
pub struct FaultsArgs {
    /// Scenarios to run, comma-separated (default: all).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub faults: Vec<crate::faults::Fault>,
    /// Seconds each scenario's fault phase lasts (faults repeat until it is over).
    #[arg(long, default_value_t = 3)]
    pub(crate) fault_duration: u64,
    /// Milliseconds PostgreSQL stays paused or down per fault.
    #[arg(long, default_value_t = 1500)]
    pub(crate) outage_ms: u64,
    /// Clients calling at once (spread over the server processes).
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Calls per client in one round of the workload.
    #[arg(long, default_value_t = 15)]
    pub ops: usize,
    /// Queues each round spreads over (each checked on its own).
    #[arg(long, default_value_t = 4)]
    pub queues: usize,
    /// Seed of the generated calls (default: random, printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Client-side timeout of one call in ms.
    #[arg(long, default_value_t = 1000)]
    pub(crate) op_timeout_ms: u64,
    /// The client-side timeout of the last client in client-timeouts, in ms.
    #[arg(long, default_value_t = 12)]
    pub short_timeout_ms: u64,
    /// Model steps the linearizability search may take per queue before "unknown".
    #[arg(long, default_value_t = crate::concurrent::linearize::DEFAULT_BUDGET)]
    pub budget: u64,
    /// Where the timeline (HTML) and history (JSON) of a failing round are written.
    #[arg(long, default_value = "conformance-failures/faults")]
    pub failures_dir: PathBuf,
    /// Also write the scenarios' reports (verdicts, drain, anomaly counts) here as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run the stress scenarios (spool-capacity, slow-client, shutdown-under-load) at
    /// the size their defects were found at (a gigabyte spooled, 3,000 stalled
    /// connections, 500 parked pops) instead of the bounded size.
    #[arg(long)]
    pub(crate) full_stress: bool,
    /// Progress lines on stderr.
    #[arg(long, short)]
    pub verbose: bool,
}

#[cfg(feature = "embedded")]
#[derive(Debug, Args, Clone)]
/// The options of `cluster`.
pub struct ClusterArgs {
    /// queen-server processes on the one database.
    #[arg(long, default_value_t = 2)]
    pub servers: usize,
    /// A streaming standby beside the primary: `sync` (commits wait for it) or `async`.
    #[arg(long, value_parser = ["sync", "async"])]
    pub standby: Option<String>,
    /// DB_POOL_SIZE of each server.
    #[arg(long, default_value_t = 10)]
    pub pool_size: u32,
}

#[derive(Debug, Args, Clone)]
/// The options of `recheck`.
pub struct RecheckArgs {
    /// The history file (a JSON array of calls).
    pub file: PathBuf,
    /// Model steps the search may take per queue before "unknown".
    #[arg(long, default_value_t = crate::concurrent::linearize::DEFAULT_BUDGET)]
    pub budget: u64,
    /// Seconds the whole search may take before "unknown".
    #[arg(long, default_value_t = crate::concurrent::DEFAULT_SEARCH_LIMIT.as_secs())]
    pub(crate) search_limit_s: u64,
    /// Let answer-only differences through, as a run with `--keep-going` did.
    #[arg(long)]
    pub(crate) keep_going: bool,
}

/// How `watch` and `check` judge what they see.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Verdict")]
pub struct JudgeArgs {
    /// PROJECT-level differences fail the watch too.
    #[arg(long)]
    pub strict: bool,
    /// A known deviation, allowed everywhere (as `run --accept`).
    #[arg(long, value_name = "RULE-ID[:kind]|VARIANT")]
    pub accept: Vec<String>,
    /// Milliseconds the broker's clock may differ from this machine's.
    #[arg(long, default_value_t = 5)]
    pub skew_ms: i64,
    /// The broker's body limit in bytes (413 above it).
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    pub body_limit: usize,
    /// The broker's default long-poll timeout in ms.
    #[arg(long, default_value_t = 30_000)]
    pub default_timeout_ms: u64,
    /// RET-3: the broker's retention interval in ms.
    #[arg(long, default_value_t = queen_reference::model::retention::DEFAULT_RETENTION_LAG_MS)]
    pub retention_interval_ms: i64,
    /// Write a JSON report here at the end.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write a JUnit XML report here at the end (one test case per queue).
    #[arg(long)]
    pub junit: Option<PathBuf>,
}

impl JudgeArgs {
    /// The model's settings: a broker that is not ours, answer-only differences noted.
    fn settings(&self) -> Result<CheckSettings, String> {
        let mut accept = Vec::new();
        for a in self.accept.iter().flat_map(|a| a.split(',')) {
            accept.push(Accept::parse(a).map_err(|e| format!("--accept {a}: {e}"))?);
        }
        Ok(CheckSettings {
            skew_ms: self.skew_ms,
            default_timeout_ms: self.default_timeout_ms,
            body_limit: self.body_limit,
            strict_project: self.strict,
            keep_going: true,
            accept,
            retention_lag_ms: self.retention_interval_ms,
            ..CheckSettings::default()
        })
    }
}

/// The options of `watch`.
#[derive(Debug, Args, Clone)]
pub struct WatchArgs {
    /// Where clients connect (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:6633")]
    pub listen: std::net::SocketAddr,
    /// The broker's base URL.
    #[arg(long)]
    pub target: String,
    /// Write every exchange here as a JSON line (for `check`).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Write every finding here as a JSON line, as it is made.
    #[arg(long, value_name = "FILE")]
    pub findings: Option<PathBuf>,
    /// Serve `GET /metrics` (Prometheus text) here.
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<std::net::SocketAddr>,
    #[command(flatten)]
    /// How the traffic is judged, and the reports.
    pub judge: JudgeArgs,
}

/// The options of `check`.
#[derive(Debug, Args, Clone)]
pub struct HistoryCheckArgs {
    /// The history: JSON lines from `watch --record`, or a HAR file.
    pub file: PathBuf,
    /// The broker's base URL the curl lines name.
    #[arg(long, default_value = "http://127.0.0.1:6632")]
    pub target: String,
    #[command(flatten)]
    /// How the history is judged, and the reports.
    pub judge: JudgeArgs,
}

#[derive(Debug, Args, Clone)]
/// The options of `run`.
pub struct RunArgs {
    #[command(flatten)]
    /// The broker to check, or the embedded one.
    pub broker: TargetArgs,
    #[command(flatten)]
    /// Which cases run (`--only`, `--skip`, `--without`).
    pub select: SelectionArgs,
    #[command(flatten)]
    /// The concurrent scenario (`--concurrency`).
    pub concurrent: ConcurrencyArgs,
    #[command(flatten)]
    /// The lockstep property run.
    pub lockstep: LockstepArgs,
    #[command(flatten)]
    /// The tokens for a broker with authentication on (section 14).
    pub auth: AuthArgs,
    #[command(flatten)]
    /// The JUnit and JSON reports to write.
    pub reports: ReportArgs,
    #[command(flatten)]
    /// What fails the run (`--strict`, expected failures, accepted findings).
    pub verdict: VerdictArgs,
    #[command(flatten)]
    /// Concurrency and time limits of the run.
    pub limits: LimitArgs,
    #[command(flatten)]
    /// How the terminal output looks.
    pub terminal: TerminalArgs,
}

/// The broker under test and what it lacks.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Target")]
pub struct TargetArgs {
    /// The broker's base URL (http only); several, comma-separated, for brokers that
    /// form one system (requests go round robin over them, the concurrent clients
    /// spread). Without it, our server runs in-process.
    #[arg(long)]
    pub target: Option<String>,
    /// Engine of the in-process server (without --target).
    #[cfg(feature = "embedded")]
    #[arg(long, value_enum)]
    pub engine: Option<crate::embedded::Engine>,
    /// Capabilities the broker lacks, comma-separated (e.g. maintenance,delete); their
    /// cases are skipped and listed as skipped. Capabilities: core, configure, dedup,
    /// dead-letter, transactions, discovery, long-poll, subscription, visibility,
    /// maintenance, lease-extend, delete, bad-input, database-control, auth, retention,
    /// management (a broker that answers 404 to the overview is without management anyway).
    #[arg(long, value_delimiter = ',')]
    pub without: Vec<String>,
}

/// Which entries of the catalog run, and how many cases at once.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Selection")]
pub struct SelectionArgs {
    /// Run only what this selects (repeatable, or comma-separated): a case id, a family
    /// (`pop-1`: every `pop-1/...` case, not `pop-10`), a pattern with `*`
    /// (`ack-6/retry-*`), `rule:ACK-2`, `capability:dedup` or `level:seed`. `lockstep`
    /// and `concurrent` select the property run and the concurrent scenario. What is
    /// not selected is left out of the reports (not "skipped"); a selector that selects
    /// nothing is an error.
    #[arg(long, value_name = "SELECTOR")]
    pub only: Vec<String>,
    /// Run the cases that cite this rule (repeatable; as `--only rule:ID`).
    #[arg(long, value_name = "RULE-ID")]
    pub rule: Vec<String>,
    /// Leave out what this selects (repeatable; selectors as for `--only`), e.g.
    /// `--skip lockstep --skip level:open`.
    #[arg(long, value_name = "SELECTOR")]
    pub skip: Vec<String>,
    /// Cases running at once.
    #[arg(long, short, default_value_t = 12)]
    pub jobs: usize,
}

/// The concurrent scenario: clients calling at once, and the search that checks their history.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Concurrent scenario")]
pub struct ConcurrencyArgs {
    /// Also run the concurrent scenario with N clients calling at once: the history is
    /// checked for linearizability, every queue is drained, and the invariants are
    /// checked (reported as `concurrent/linearizable-and-drained`; `--only concurrent`
    /// runs it alone). 0: no concurrent scenario.
    #[arg(long, default_value_t = 0)]
    pub concurrency: usize,
    /// Concurrent scenario: calls per client.
    #[arg(long, default_value_t = 30)]
    pub ops: usize,
    /// Concurrent scenario: queues the calls spread over (each checked on its own).
    /// Default: one per two clients, at least two (the search's cost grows steeply
    /// with the clients sharing a queue).
    #[arg(long)]
    pub queues: Option<usize>,
    /// Concurrent scenario: client-side timeout of one call in ms (past it the answer is
    /// unknown: maybe applied).
    #[arg(long, default_value_t = 10_000)]
    pub(crate) op_timeout_ms: u64,
    /// Concurrent scenario: `leaseSeconds` of the clients' pops; the drain waits the
    /// leases out, so short ones keep it quick.
    #[arg(long, default_value_t = 1)]
    pub(crate) lease_seconds: u32,
    /// Concurrent scenario: model steps the linearizability search may take per queue
    /// before its verdict is "unknown" (which fails the run).
    #[arg(long, default_value_t = crate::concurrent::linearize::DEFAULT_BUDGET)]
    pub budget: u64,
    /// Concurrent scenario: seconds the linearizability search may take before its
    /// verdict is "unknown" (which fails the run): a run never hangs in the search.
    #[arg(long, default_value_t = crate::concurrent::DEFAULT_SEARCH_LIMIT.as_secs())]
    pub(crate) search_limit_s: u64,
    /// Concurrent scenario: where its timeline (HTML) is written. Without it, the
    /// timeline of a scenario that does not pass goes to
    /// `conformance-failures/concurrent-timeline.html`; with it, it is always written.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
}

/// The lockstep property run: generated sequences checked step by step against the model.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Lockstep run")]
pub struct LockstepArgs {
    /// Seed of the lockstep run and the concurrent scenario (default: random, printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Lockstep sequences to generate (0: no lockstep run).
    #[arg(long, default_value_t = 64)]
    pub cases: u32,
    /// Longest lockstep sequence.
    #[arg(long, default_value_t = 50)]
    pub steps: u32,
    /// Parallel lockstep runners (part of what --seed reproduces).
    #[arg(long, default_value_t = 4)]
    pub(crate) lockstep_workers: usize,
    /// Seconds allowed for shrinking a lockstep counterexample.
    #[arg(long, default_value_t = 60)]
    pub(crate) shrink_secs: u32,
    /// Where lockstep counterexamples are saved.
    #[arg(long, default_value = "conformance-failures")]
    pub failures_dir: PathBuf,
}

/// The tokens of a broker with authentication on: minted from its secret, or given.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Authentication")]
pub struct AuthArgs {
    /// The broker has authentication on with this HS256 secret: the suite mints a token
    /// per level (roles in the `role` claim) and runs the `auth` cases (section 14).
    #[arg(long, env = "QUEEN_JWT_SECRET", hide_env_values = true, conflicts_with_all = ["token_admin", "token_rw", "token_ro"])]
    pub jwt_secret: Option<String>,
    /// The `iss` the minted tokens carry (when the broker checks one).
    #[arg(long, requires = "jwt_secret")]
    pub(crate) jwt_issuer: Option<String>,
    /// The `aud` the minted tokens carry (when the broker checks one).
    #[arg(long, requires = "jwt_secret")]
    pub(crate) jwt_audience: Option<String>,
    /// The broker has authentication on with keys the suite cannot know: a token with
    /// the admin role (give all three --token-* flags). Reports quote the tokens sent.
    #[arg(long, requires_all = ["token_rw", "token_ro"])]
    pub(crate) token_admin: Option<String>,
    /// A token with the read-write role.
    #[arg(long, requires_all = ["token_admin", "token_ro"])]
    pub(crate) token_rw: Option<String>,
    /// A token with the read-only role.
    #[arg(long, requires_all = ["token_admin", "token_rw"])]
    pub(crate) token_ro: Option<String>,
}

/// The report files a run writes beside its terminal output.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Reports")]
pub struct ReportArgs {
    /// Write a JUnit XML report here.
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// Write a JSON report here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What fails the run: the level held to, known deviations and the expected failures.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Verdict")]
pub struct VerdictArgs {
    /// PROJECT-level differences fail the run too.
    #[arg(long)]
    pub strict: bool,
    /// A known deviation, allowed everywhere so that every other rule is still checked
    /// (repeatable; also `accept ...` lines in --expect-failures): a rule id, a rule id
    /// with a kind (status, missing-field, mistyped-field, value, error-text, shape,
    /// flag, route-missing, claim, cause, alternative, state), or the name of a diagnosed
    /// cause (`lease-seconds-ignored`). Accepted findings are listed, never failures; an
    /// accepted cause or state divergence is followed and checking goes on.
    #[arg(long, value_name = "RULE-ID[:kind]|VARIANT")]
    pub accept: Vec<String>,
    /// Write one `accept` line per answer-only finding and per diagnosed cause of this
    /// run to FILE (an --expect-failures file), each with a comment saying what it
    /// accepts: a second run with `--expect-failures FILE` checks everything else.
    #[arg(long, value_name = "FILE")]
    pub(crate) write_accepts: Option<PathBuf>,
    /// Record an answer that differs only in what it says (status code, field names,
    /// shapes, error texts) as a finding and go on checking from what the broker did
    /// (the default with --target; our own server is held to every answer).
    #[arg(long, overrides_with = "no_keep_going")]
    pub keep_going: bool,
    /// Stop a case at its first difference of any kind.
    #[arg(long)]
    pub(crate) no_keep_going: bool,
    /// Cases allowed to fail (one id per line); a listed case that passes fails the run.
    #[arg(long)]
    pub expect_failures: Option<PathBuf>,
    /// Rewrite the --expect-failures file with this run's failures.
    #[arg(long, requires = "expect_failures")]
    pub fix: bool,
}

/// The broker's clock, limits and timeouts the model must allow for, and the time a case may take.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Broker limits and timing")]
pub struct LimitArgs {
    /// Milliseconds the broker's clock may differ from this machine's.
    #[arg(long, default_value_t = 5)]
    pub skew_ms: i64,
    /// Seconds a request may go unanswered (a long poll: its `timeout` on top) before it
    /// fails its case with its curl line, instead of holding the case.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) request_timeout_s: u64,
    /// The broker's body limit in bytes (413 above it).
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    pub body_limit: usize,
    /// RET-3: the broker's retention interval in ms, how late after becoming removable
    /// a message may still be delivered [default: 5000 against --target; 1000 for our
    /// embedded server, whose retention job then runs every 200 ms].
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
    pub(crate) retention_interval_ms: Option<i64>,
    /// The broker's default long-poll timeout in ms.
    #[arg(long, default_value_t = 30_000)]
    pub default_timeout_ms: u64,
    /// Seconds one case may take.
    #[arg(long, default_value_t = 60)]
    pub(crate) case_timeout: u64,
}

/// What the terminal shows while and after the run.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Terminal")]
pub struct TerminalArgs {
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Print the transcript of failing cases.
    #[arg(long, short)]
    pub verbose: bool,
}

impl RunArgs {
    /// Defaults, as if `queen-conformance run` had no flags.
    pub fn defaults() -> RunArgs {
        match Cli::parse_from(["queen-conformance", "run"]).command {
            Command::Run(a) => *a,
            _ => unreachable!("parsed run"),
        }
    }
}

/// Parses `--without` names.
pub(crate) fn capabilities(names: &[String]) -> Result<BTreeSet<Capability>, String> {
    names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .map(|n| {
            Capability::parse(n).ok_or_else(|| {
                let all: Vec<_> = Capability::ALL.iter().map(|c| c.as_str()).collect();
                format!("unknown capability {n:?}; known: {}", all.join(", "))
            })
        })
        .collect()
}

/// Which broker a command talks to: `--target`, or our server started here.
struct TargetChoice {
    target: Option<String>,
    #[cfg(feature = "embedded")]
    engine: Option<crate::embedded::Engine>,
}

/// Keeps the server this run started (if any) until [`Started::stop`].
struct Started {
    #[cfg(feature = "embedded")]
    embedded: Option<crate::embedded::Embedded>,
}

impl Started {
    async fn stop(self) {
        #[cfg(feature = "embedded")]
        if let Some(e) = self.embedded {
            e.stop().await;
        }
    }
}

/// Opens the broker: the target, its URL, a label for reports, and the server started
/// for it. The model is told the limits an embedded server really runs with
/// (`BODY_LIMIT`, `DEFAULT_TIMEOUT` from the environment).
#[allow(unused_mut)]
/// The tokens of a broker with authentication on, from `--jwt-secret` or `--token-*`.
/// Our own server, started in-process without either, gets authentication on with a
/// secret made for this run, so the main job runs the auth cases too (section 14).
fn suite_tokens(args: &RunArgs) -> Option<crate::auth::Tokens> {
    let ours = args.broker.target.is_none() && cfg!(feature = "embedded");
    let given = args.auth.token_admin.is_some();
    let secret = match &args.auth.jwt_secret {
        Some(s) => Some(s.clone()),
        None if ours && !given => Some(run_secret()),
        None => None,
    };
    if let Some(secret) = &secret {
        return Some(crate::auth::Tokens::minted(
            secret,
            args.auth.jwt_issuer.clone(),
            args.auth.jwt_audience.clone(),
        ));
    }
    match (
        &args.auth.token_admin,
        &args.auth.token_rw,
        &args.auth.token_ro,
    ) {
        (Some(a), Some(w), Some(r)) => {
            Some(crate::auth::Tokens::given(a.clone(), w.clone(), r.clone()))
        }
        _ => None,
    }
}

/// A random HS256 secret for one run (64 hex digits), never written anywhere.
fn run_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

// Both are changed only when the suite can start our server itself.
#[cfg_attr(not(feature = "embedded"), allow(unused_mut))]
async fn open_target(
    choice: TargetChoice,
    mut settings: CheckSettings,
    tokens: Option<crate::auth::Tokens>,
) -> Result<(Target, String, String, Started), String> {
    let mut started = Started {
        #[cfg(feature = "embedded")]
        embedded: None,
    };
    let (url, label) = match choice.target {
        Some(url) => (url.clone(), url),
        None => {
            #[cfg(feature = "embedded")]
            {
                let engine = choice.engine.unwrap_or(crate::embedded::DEFAULT_ENGINE);
                let secret = tokens
                    .as_ref()
                    .and_then(|t| t.minter.as_ref().map(|m| m.secret().to_string()));
                let e = crate::embedded::start(engine, secret.as_deref()).await?;
                settings.body_limit = e.config.body_limit;
                settings.default_timeout_ms = e.config.pop_timeout_ms();
                let out = (e.url(), format!("{} ({})", e.url(), e.label));
                started.embedded = Some(e);
                out
            }
            #[cfg(not(feature = "embedded"))]
            return Err(
                "no --target given, and this build has no embedded server (feature `embedded`)"
                    .into(),
            );
        }
    };
    #[allow(unused_mut)]
    let mut target = Target::new(&url, settings);
    target.tokens = tokens.map(std::sync::Arc::new);
    #[cfg(feature = "embedded")]
    {
        target.database = started.embedded.as_ref().and_then(|e| e.database());
    }
    let probe = format!("cf{}probe", runner::new_run_id());
    if let Err(e) = crate::probe::probe(&target, &probe).await {
        started.stop().await;
        return Err(e);
    }
    Ok((target, url, label, started))
}

/// Runs `queen-conformance run` and returns the report (also written where asked).
pub async fn run(args: &RunArgs) -> Result<Report, String> {
    let selection = selection(args)?;
    let without = capabilities(&args.broker.without)?;
    check_outputs(args)?;
    let (expected, accept) = expectations(args)?;
    let tokens = suite_tokens(args);
    let settings = check_settings(args, &accept, tokens.as_ref());
    let starting = crate::progress::Progress::spinner(
        !args.terminal.no_progress,
        if args.broker.target.is_some() {
            "checking the target answers"
        } else {
            "starting our server and checking it answers"
        },
    );
    let opened = open_target(
        TargetChoice {
            target: args.broker.target.clone(),
            #[cfg(feature = "embedded")]
            engine: args.broker.engine,
        },
        settings,
        tokens,
    )
    .await;
    starting.finish();
    let (target, _url, label, server) = opened?;
    let opts = run_options(args, target, label, without, selection);
    let results = runner::run(&opts).await;
    server.stop().await;
    let mut report = Report::build_with(results, args.verdict.strict, &expected.cases, &accept);
    if args.verdict.fix {
        fix_expectations(args, &expected, &mut report)?;
    }
    if let Some(p) = &args.verdict.write_accepts {
        report::accepts::write(p, &report)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    write_concurrent_files(args, &mut report)?;
    write_reports(args, &report)?;
    Ok(report)
}

/// Every output path the run will write, checked before the first request.
fn check_outputs(args: &RunArgs) -> Result<(), String> {
    for (flag, p) in [
        ("--junit", &args.reports.junit),
        ("--json", &args.reports.json),
        ("--timeline", &args.concurrent.timeline),
        ("--write-accepts", &args.verdict.write_accepts),
    ] {
        if let Some(p) = p {
            check_writable(flag, p)?;
        }
    }
    Ok(())
}

/// The expected failures (`--expect-failures`) and every accepted deviation: the file's
/// `accept` lines, then `--accept`'s.
fn expectations(args: &RunArgs) -> Result<(expect::Expectations, Vec<Accept>), String> {
    let expected = match &args.verdict.expect_failures {
        Some(p) if p.exists() => {
            expect::load(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?
        }
        Some(p) if !args.verdict.fix => {
            return Err(format!(
                "{} does not exist (use --fix to create it)",
                p.display()
            ))
        }
        _ => expect::Expectations::default(),
    };
    let mut accept = expected.accept.clone();
    for a in args.verdict.accept.iter().flat_map(|a| a.split(',')) {
        accept.push(Accept::parse(a).map_err(|e| format!("--accept {a}: {e}"))?);
    }
    Ok((expected, accept))
}

/// What the model allows for this broker: its clock, limits and timeouts, the level it
/// is held to, and the deviations accepted.
fn check_settings(
    args: &RunArgs,
    accept: &[Accept],
    tokens: Option<&crate::auth::Tokens>,
) -> CheckSettings {
    let keep_going =
        !args.verdict.no_keep_going && (args.verdict.keep_going || args.broker.target.is_some());
    CheckSettings {
        skew_ms: args.limits.skew_ms,
        default_timeout_ms: args.limits.default_timeout_ms,
        body_limit: args.limits.body_limit,
        // Without --strict the model accepts departures from PROJECT decisions and the
        // report lists them ("differs on project-resolved points").
        strict_project: args.verdict.strict,
        keep_going,
        accept: accept.to_vec(),
        auth: tokens.map(|t| std::sync::Arc::new(t.book())),
        retention_lag_ms: args.limits.retention_interval_ms.unwrap_or(
            if args.broker.target.is_some() {
                queen_reference::model::retention::DEFAULT_RETENTION_LAG_MS
            } else {
                EMBEDDED_RETENTION_LAG_MS
            },
        ),
        request_timeout_ms: args.limits.request_timeout_s * 1000,
    }
}

/// What the runner runs against the opened target: the cases, the lockstep run and
/// the concurrent scenario, all from one seed.
fn run_options(
    args: &RunArgs,
    target: Target,
    label: String,
    without: BTreeSet<Capability>,
    selection: Selection,
) -> RunOptions {
    let seed = args.lockstep.seed.unwrap_or_else(|| {
        let u = uuid::Uuid::new_v4().as_u64_pair().0;
        u % 10_000_000_000
    });
    RunOptions {
        target,
        target_label: label,
        without: without.clone(),
        selection,
        jobs: args.select.jobs,
        case_timeout_s: args.limits.case_timeout,
        lockstep: Some(LockstepOptions {
            seed,
            cases: args.lockstep.cases,
            steps: args.lockstep.steps,
            workers: args.lockstep.lockstep_workers,
            without,
            failures_dir: Some(args.lockstep.failures_dir.clone()),
            max_shrink_secs: args.lockstep.shrink_secs,
        }),
        concurrent: (args.concurrent.concurrency > 0).then(|| crate::concurrent::ScenarioOptions {
            workload: crate::concurrent::Workload {
                op_timeout_ms: args.concurrent.op_timeout_ms,
                lease_seconds: Some(args.concurrent.lease_seconds.max(1)),
                ..crate::concurrent::Workload::new(
                    args.concurrent.concurrency,
                    args.concurrent.ops,
                    args.concurrent
                        .queues
                        .unwrap_or(args.concurrent.concurrency.div_ceil(2).max(2)),
                    seed,
                )
            },
            budget: args.concurrent.budget,
            search_limit: std::time::Duration::from_secs(args.concurrent.search_limit_s.max(1)),
        }),
        progress: !args.terminal.no_progress,
    }
}

/// `--fix`: rewrites the expected failures with this run's failures, and judges the
/// run again against them.
fn fix_expectations(
    args: &RunArgs,
    expected: &expect::Expectations,
    report: &mut Report,
) -> Result<(), String> {
    let Some(p) = &args.verdict.expect_failures else {
        return Ok(());
    };
    // Entries this run did not cover (left out by the selection) keep their lines.
    let mut listed = report.failing_ids();
    listed.extend(
        expected
            .cases
            .iter()
            .filter(|id| !report.entries.iter().any(|e| &e.id == *id))
            .cloned(),
    );
    expect::write(p, &listed, &expected.accept)
        .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    // The file now matches this run: judge it again against the new list.
    report.judge(&listed);
    Ok(())
}

/// Where the concurrent scenario's timeline goes when `--timeline` is not given.
const DEFAULT_TIMELINE: &str = "conformance-failures/concurrent-timeline.html";

/// The concurrent scenario's timeline (every verdict but a pass, and always when
/// `--timeline` is given) and, when it does not pass, its whole history beside it.
fn write_concurrent_files(args: &RunArgs, report: &mut Report) -> Result<(), String> {
    let Some(c) = report.concurrent.as_ref() else {
        return Ok(());
    };
    let path = args
        .concurrent
        .timeline
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_TIMELINE));
    let write = |p: &std::path::Path, text: String| {
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
    };
    if args.concurrent.timeline.is_some() || !c.passed() {
        write(
            &path,
            crate::concurrent::timeline::html(&c.history, &c.outcome),
        )?;
        report.timeline = Some(path.clone());
    }
    if !c.passed() {
        let merged = crate::concurrent::invariants::merged(&c.history, &c.drain);
        let text = serde_json::to_string_pretty(&merged.to_json()).expect("JSON serializes");
        write(&path.with_file_name("concurrent-history.json"), text)?;
    }
    Ok(())
}

/// The selection of `--only`, `--rule` and `--skip`, checked against every entry a run
/// can have.
fn selection(args: &RunArgs) -> Result<Selection, String> {
    let mut only = args.select.only.clone();
    only.extend(args.select.rule.iter().map(|r| format!("rule:{r}")));
    let sel = Selection::for_run(&only, &args.select.skip)?;
    let concurrent = Entry::named(runner::CONCURRENT_ID);
    if args.concurrent.concurrency == 0 && sel.only.iter().any(|s| s.matches(&concurrent)) {
        return Err("--only concurrent needs --concurrency N (N clients at once)".into());
    }
    Ok(sel)
}

/// An output path the run will write, checked before the first request: a mistyped or
/// unwritable path costs nothing then, rather than a whole run.
fn check_writable(flag: &str, p: &std::path::Path) -> Result<(), String> {
    let existed = p.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(p)
        .map_err(|e| format!("{flag} {}: cannot write there: {e}", p.display()))?;
    if !existed {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

/// Writes the JUnit and JSON reports; one that cannot be written does not keep the
/// other from being written.
fn write_reports(args: &RunArgs, report: &Report) -> Result<(), String> {
    let mut errors = Vec::new();
    if let Some(p) = &args.reports.junit {
        if let Err(e) = std::fs::write(p, report::junit::render(report)) {
            errors.push(format!("cannot write {}: {e}", p.display()));
        }
    }
    if let Some(p) = &args.reports.json {
        let text =
            serde_json::to_string_pretty(&report::json::render(report)).expect("JSON serializes");
        if let Err(e) = std::fs::write(p, text) {
            errors.push(format!("cannot write {}: {e}", p.display()));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// `queen-conformance cluster`: a deployment kept until Ctrl-C.
#[cfg(feature = "embedded")]
async fn cluster(args: &ClusterArgs) -> Result<(), String> {
    use crate::faults::deployment::{Deployment, Layout, ServerProgram};
    let mut layout = Layout::plain(args.servers.max(1), args.pool_size);
    layout.standby = match args.standby.as_deref() {
        Some("sync") => Some(queen_pg::Replication::Synchronous),
        Some(_) => Some(queen_pg::Replication::Asynchronous),
        None => None,
    };
    let d = Deployment::start_layout(ServerProgram::for_this_executable()?, layout).await?;
    println!("servers: {}", d.urls().join(","));
    println!("database: {}", d.database_urls().join(" "));
    println!("directory: {} (Ctrl-C stops everything)", d.dir().display());
    let _ = tokio::signal::ctrl_c().await;
    d.stop().await;
    Ok(())
}

/// `queen-conformance faults`: runs each scenario; returns the summaries and whether
/// all passed.
#[cfg(feature = "embedded")]
pub async fn faults(args: &FaultsArgs) -> Result<(String, bool), String> {
    use crate::faults::{deployment::ServerProgram, Fault, Options};
    let program = ServerProgram::for_this_executable()?;
    let seed = args
        .seed
        .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0 % 10_000_000_000);
    let mut opts = Options::bounded(program.clone(), seed);
    opts.duration = std::time::Duration::from_secs(args.fault_duration);
    opts.outage = std::time::Duration::from_millis(args.outage_ms);
    opts.clients = args.concurrency.max(1);
    opts.ops_per_round = args.ops.max(1);
    opts.queues = args.queues.max(1);
    opts.op_timeout_ms = args.op_timeout_ms;
    opts.short_timeout_ms = args.short_timeout_ms;
    opts.budget = args.budget;
    opts.verbose = args.verbose;
    opts.failures_dir = Some(args.failures_dir.clone());
    if args.full_stress {
        opts.stress = crate::faults::stress::StressSizes::full();
    }
    let list = if args.faults.is_empty() {
        Fault::ALL.to_vec()
    } else {
        args.faults.clone()
    };
    let mut text = format!(
        "queen-conformance faults: seed {seed}, server {}, {} clients x {} calls per round\n",
        program.describe(),
        opts.clients,
        opts.ops_per_round
    );
    let mut passed = true;
    let mut reports = Vec::new();
    for f in list {
        let r = crate::faults::run(f, &opts).await;
        passed &= r.passed();
        text.push_str(&r.summary());
        reports.push(r.to_json());
    }
    if let Some(p) = &args.json {
        let v =
            serde_json::json!({"seed": seed.to_string(), "passed": passed, "scenarios": reports});
        std::fs::write(
            p,
            serde_json::to_string_pretty(&v).expect("JSON serializes"),
        )
        .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok((text, passed))
}

/// `queen-conformance list`.
pub fn list(json: bool) -> String {
    let cases = catalog::all();
    if json {
        let v: Vec<_> = cases
            .iter()
            .map(|c| serde_json::json!({"id": c.id, "rules": c.rules, "level": c.level, "capability": c.capability, "needs": c.needs, "alone": c.exclusive}))
            .collect();
        return serde_json::to_string_pretty(&v).expect("serializes");
    }
    let mut s = String::new();
    for c in &cases {
        s.push_str(&format!(
            "{:<72} {:<8} {:<13} {}\n",
            c.id,
            c.level.as_str(),
            c.capability.as_str(),
            crate::case::join(c.rules)
        ));
    }
    s.push_str(&format!("{} cases\n", cases.len()));
    s
}

/// `queen-conformance rules`.
pub fn rules(json: bool) -> String {
    let cases = catalog::all();
    if json {
        let v: Vec<_> = RULES
            .iter()
            .map(|r| {
                let ids: Vec<&str> = cases
                    .iter()
                    .filter(|c| c.rules.contains(&r.id))
                    .map(|c| c.id)
                    .collect();
                serde_json::json!({"id": r.id, "level": r.level, "title": r.title, "cases": ids})
            })
            .collect();
        return serde_json::to_string_pretty(&v).expect("serializes");
    }
    let mut s = String::new();
    for r in RULES {
        let n = cases.iter().filter(|c| c.rules.contains(&r.id)).count();
        s.push_str(&format!(
            "{:<14} {:<8} {:>3} cases  {}\n",
            r.id,
            r.level.as_str(),
            n,
            r.title
        ));
    }
    s
}

/// The whole program: returns the exit status.
pub async fn main_with(cli: Cli) -> i32 {
    match cli.command {
        Command::List { json } => {
            print!("{}", list(json));
            0
        }
        Command::Rules { json } => {
            print!("{}", rules(json));
            0
        }
        Command::ReportSchema => {
            print!("{}", report::document::schema());
            0
        }
        Command::Spec => {
            print!("{}", crate::version::SPEC_TEXT);
            0
        }
        #[cfg(feature = "embedded")]
        Command::Faults(args) => verdict_printed(faults(&args).await),
        #[cfg(feature = "embedded")]
        Command::Cluster(args) => match cluster(&args).await {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("queen-conformance: {e}");
                2
            }
        },
        Command::Recheck(args) => verdict_printed(recheck(&args)),
        Command::Watch(args) => watched(watch(&args).await, &args.judge),
        Command::Check(args) => watched(check_history(&args), &args.judge),
        #[cfg(feature = "embedded")]
        Command::Serve { args } => crate::faults::serve::main(&args).await,
        Command::Run(args) => match run(&args).await {
            Ok(report) => {
                let paint = report::terminal::Paint::for_stdout();
                print!(
                    "{}",
                    report::terminal::render_with(&report, args.terminal.verbose, paint)
                );
                report.exit_code()
            }
            Err(e) => {
                eprintln!("queen-conformance: {e}");
                2
            }
        },
    }
}

/// Prints a command's text and gives its exit status: 0 passed, 1 failed, 2 could not run.
fn verdict_printed(result: Result<(String, bool), String>) -> i32 {
    match result {
        Ok((text, passed)) => {
            print!("{text}");
            i32::from(!passed)
        }
        Err(e) => {
            eprintln!("queen-conformance: {e}");
            2
        }
    }
}

/// `watch`: until Ctrl-C or SIGTERM.
async fn watch(args: &WatchArgs) -> Result<crate::watch::WatchReport, String> {
    let opts = crate::watch::WatchOptions {
        listen: args.listen,
        target: args.target.trim_end_matches('/').to_string(),
        settings: args.judge.settings()?,
        record: args.record.clone(),
        findings: args.findings.clone(),
        admin: args.admin,
        live: true,
    };
    eprintln!(
        "queen-conformance watch: clients connect to http://{}, traffic goes to {}; Ctrl-C ends the watch",
        args.listen, opts.target
    );
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    crate::watch::watch(opts, stop).await
}

fn check_history(args: &HistoryCheckArgs) -> Result<crate::watch::WatchReport, String> {
    let report = crate::watch::check(&args.file, args.judge.settings()?, &args.target)?;
    let paint = report::terminal::Paint::for_stdout();
    for f in &report.findings {
        print!("{}", crate::watch::report::render_finding(f, paint));
    }
    Ok(report)
}

/// Prints a watch's summary, writes its reports and gives its exit status.
fn watched(result: Result<crate::watch::WatchReport, String>, judge: &JudgeArgs) -> i32 {
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("queen-conformance: {e}");
            return 2;
        }
    };
    print!("{}", report.render(report::terminal::Paint::for_stdout()));
    let write = |path: &Option<PathBuf>, text: String| match path {
        Some(p) => {
            std::fs::write(p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
        }
        None => Ok(()),
    };
    let json = serde_json::to_string_pretty(&report).unwrap_or_default();
    if let Err(e) = write(&judge.json, json).and_then(|_| write(&judge.junit, report.junit())) {
        eprintln!("queen-conformance: {e}");
        return 2;
    }
    report.exit_code()
}

/// `recheck`: the recorded history searched as the run searched it (pushes answered
/// `buffered` taken as unknown, calls that never reached the broker left out). The
/// share of unanswered calls is not judged: a fault scenario's rounds have many.
fn recheck(args: &RecheckArgs) -> Result<(String, bool), String> {
    use crate::concurrent::history::History;
    let text = std::fs::read_to_string(&args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not JSON: {e}", args.file.display()))?;
    let h = History::from_json(&v).map_err(|e| format!("{}: {e}", args.file.display()))?;
    #[cfg(feature = "embedded")]
    let h = crate::faults::audit::for_search(&h);
    let limit = std::time::Duration::from_secs(args.search_limit_s.max(1));
    let settings = CheckSettings {
        keep_going: args.keep_going,
        ..CheckSettings::default()
    };
    let outcome = crate::concurrent::check_deep(&h, &settings, args.budget, limit);
    Ok((crate::concurrent::summary(&h, &outcome), outcome.passed()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Section 14 in the main job: our server in-process gets authentication on with a
    /// fresh secret; a target of the user's has it only when told.
    #[cfg(feature = "embedded")]
    #[test]
    fn our_server_runs_with_authentication_on_and_a_target_only_when_told() {
        let mut a = RunArgs::defaults();
        let minted = |a: &RunArgs| suite_tokens(a).is_some_and(|t| t.minter.is_some());
        assert!(minted(&a), "the embedded broker gets a secret for the run");
        assert_ne!(run_secret(), run_secret());
        a.broker.target = Some("http://127.0.0.1:6632".into());
        assert!(
            suite_tokens(&a).is_none(),
            "no tokens for a target without them"
        );
        a.auth.jwt_secret = Some("given".into());
        assert!(minted(&a));
    }

    /// A recorded fault round whose unanswered pops kept a whole-history search busy past
    /// its time limit: leaving them out first decides it in a few steps.
    #[test]
    fn recheck_decides_a_recorded_round_with_unanswered_pops() {
        let text = recheck_fixture("broker-partition-unanswered-pops.json");
        assert!(text.contains("61 calls"), "{text}");
        assert!(text.contains("cq2: 22 calls"), "{text}");
    }

    /// A queue of eight clients whose pops raced lease expiries: the search drowned in
    /// states that differed only in a lease's deadline and ran out of time; joined, and
    /// with each client's calls kept in their order, it decides in about one step a call.
    #[test]
    fn recheck_decides_eight_clients_racing_lease_expiries() {
        let text = recheck_fixture("eight-clients-lease-expiry-bursts.json");
        assert!(text.contains("cq0: 288 calls"), "{text}");
    }

    /// Rechecks a recorded history with a small budget, asserting that it passed.
    fn recheck_fixture(name: &str) -> String {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/histories");
        let args = RecheckArgs {
            file: PathBuf::from(dir).join(name),
            budget: 2_000,
            search_limit_s: 600,
            keep_going: false,
        };
        let (text, passed) = recheck(&args).unwrap();
        assert!(passed, "{text}");
        text
    }

    #[test]
    fn recheck_refuses_what_is_not_a_history() {
        let file = std::env::temp_dir().join(format!("queen-recheck-{}.json", std::process::id()));
        let call = r#"[{"id": 0, "request": {"method": "GET", "path": "/health", "query": []}}]"#;
        std::fs::write(&file, call).unwrap();
        let args = RecheckArgs {
            file,
            budget: 10,
            search_limit_s: 1,
            keep_going: false,
        };
        let e = recheck(&args).unwrap_err();
        let _ = std::fs::remove_file(&args.file);
        assert!(e.contains("call 0: call without a numeric `client`"), "{e}");
    }

    /// `rules --json` lists every rule once, with its level and the cases citing it.
    #[test]
    fn rules_as_json_name_every_rule_with_its_cases() {
        let v: serde_json::Value = serde_json::from_str(&rules(true)).unwrap();
        let rows = v.as_array().unwrap();
        assert_eq!(rows.len(), RULES.len());
        let ack6 = rows.iter().find(|r| r["id"] == "ACK-6").unwrap();
        assert_eq!(ack6["level"], "SEED");
        let cases = ack6["cases"].as_array().unwrap();
        assert!(
            cases
                .iter()
                .any(|c| c == "ack-6/retry-spends-no-retry-budget"),
            "{ack6}"
        );
    }

    /// A report path that cannot be written is refused before anything runs, and an
    /// existing file there is left as it was.
    #[tokio::test]
    async fn an_unwritable_report_path_is_refused_before_the_run() {
        let mut a = RunArgs::defaults();
        a.broker.target = Some("http://127.0.0.1:9".into());
        a.reports.junit = Some("/nonexistent-dir/report.xml".into());
        let err = run(&a).await.err().expect("refused");
        assert!(
            err.starts_with("--junit /nonexistent-dir/report.xml: cannot write there"),
            "{err}"
        );
        // Refused before the target was asked anything (it listens nowhere).
        assert!(!err.contains("cannot reach"), "{err}");
        let dir = std::env::temp_dir().join(format!("qc-writable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kept = dir.join("kept.json");
        std::fs::write(&kept, "before").unwrap();
        check_writable("--json", &kept).unwrap();
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "before");
        let fresh = dir.join("fresh.json");
        check_writable("--json", &fresh).unwrap();
        assert!(!fresh.exists(), "the check leaves no file behind");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// `run --help` names every capability `--without` takes, so the list cannot go
    /// stale when a capability is added.
    #[test]
    fn run_help_lists_every_capability() {
        let mut cmd = Cli::command();
        let help = cmd
            .find_subcommand_mut("run")
            .unwrap()
            .render_long_help()
            .to_string();
        for c in Capability::ALL {
            assert!(help.contains(c.as_str()), "{} missing:\n{help}", c.as_str());
        }
    }
}
