//! Fault scenarios (cargo feature `embedded`): the concurrent workload runs against a
//! deployment the harness owns ([`deployment`]: a PostgreSQL cluster and one or two
//! `queen-server` processes) while a fault is injected into it:
//!
//! * `pg-pause` — every PostgreSQL process SIGSTOPped for a while, then SIGCONTed;
//! * `pg-kill` — every PostgreSQL process SIGKILLed, restarted on the same data
//!   directory after a while (crash recovery; pushes meanwhile answer `buffered`);
//! * `server-kill` — two server processes, clients spread over them; one is SIGKILLed
//!   and restarted on the same port and spool directory, once plainly and once while
//!   PostgreSQL is down and its spool holds pushes (the restarted process adopts and
//!   replays them, PUSH-7);
//! * `two-servers` — two processes on one database, clients spread, no fault;
//! * `client-timeouts` — client timeouts shorter than the server's work, so many
//!   answers are unknown (the server still finishes, or cancels, the work);
//! * `failover` — two servers on a primary with a synchronous streaming standby and a
//!   multi-host `DATABASE_URL`; the standby's stream (through a proxy) is cut so it
//!   falls behind, the primary SIGKILLed, the standby promoted; the servers find the new
//!   primary and replay what they spooled. `failover-async` is the same with an
//!   asynchronous standby: acknowledged pushes are lost, and the scenario must report
//!   it (it is not in the default list);
//! * `broker-partition` — two servers, each reaching PostgreSQL through a proxy of its
//!   own; server 0's proxy is cut for a while (its connections reset), server 1 keeps
//!   the database;
//! * `spool-orphan` — server 0 is cut off until it spools pushes, then SIGKILLed for
//!   good; server 1 must adopt its spool and replay it.
//!
//! The workload runs in rounds (each on queues of its own, 1 s leases) until the fault
//! phase is over, then one more round on the recovered deployment. Afterwards every
//! server must be healthy with its spool replayed; each round's history must be
//! linearizable (within the budget: undecided is not a pass), with `buffered` answers
//! handed to the search as unknown ([`audit::for_search`]); and then, as after
//! `run --concurrency`, every queue of every round is drained with every group the
//! clients used plus a fresh one ([`crate::concurrent::drain`]) and the invariants are
//! checked over all rounds and the drain together ([`crate::concurrent::invariants`]:
//! nothing answered 201 `queued` or `buffered` lost, PUSH-7; no delivery past a
//! committed cursor; partition order; one live lease per `(partition, group)`, ACK-4;
//! every duplicate explained), counted by kind, bad and allowed. A violation or a bad
//! anomaly fails the scenario, and so does a fault that did not visibly happen.

pub mod audit;
pub mod deployment;
pub mod proxy;
mod scenario;
pub mod serve;
pub mod stress;

use crate::concurrent::invariants::InvariantReport;
use crate::concurrent::History;
use deployment::ServerProgram;
pub use scenario::run;
use std::time::Duration;

/// One fault scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// PostgreSQL is paused (SIGSTOP) and resumed while the workload runs.
    #[value(help = None)]
    PgPause,
    /// PostgreSQL is killed and restarted while the workload runs.
    #[value(help = None)]
    PgKill,
    /// A server process is killed and restarted while the workload runs.
    #[value(help = None)]
    ServerKill,
    /// Two servers on one database share the workload (section 18).
    #[value(help = None)]
    TwoServers,
    /// Some clients give up on calls the broker still carries out (answers held back by a proxy).
    #[value(help = None)]
    ClientTimeouts,
    /// Two servers on a primary with a synchronous standby; the standby falls behind,
    /// the primary is killed, the standby promoted: the servers follow it.
    Failover,
    /// `failover` with an asynchronous standby: pushes the primary acknowledged and
    /// the standby never received are lost, and the scenario must say so (it fails;
    /// run it by name, it is not in the default list).
    FailoverAsync,
    /// Two servers, each through a proxy: one loses the database for a while, the
    /// other keeps it.
    BrokerPartition,
    /// Two servers: one loses the database, spools pushes, and dies for good; the
    /// other adopts its spool and replays it.
    SpoolOrphan,
    /// Stress (see [`stress`]): a full spool, a killed replay.
    SpoolCapacity,
    /// Stress: stalled connections past the cap.
    SlowClient,
    /// Stress: SIGTERM under push load with parked pops.
    ShutdownUnderLoad,
}

impl Fault {
    /// Every scenario a broker should pass (`failover-async` shows a loss instead).
    pub const ALL: [Fault; 11] = [
        Fault::PgPause,
        Fault::PgKill,
        Fault::ServerKill,
        Fault::TwoServers,
        Fault::ClientTimeouts,
        Fault::Failover,
        Fault::BrokerPartition,
        Fault::SpoolOrphan,
        Fault::SpoolCapacity,
        Fault::SlowClient,
        Fault::ShutdownUnderLoad,
    ];

    /// The scenario's name, as `faults --scenarios` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Fault::PgPause => "pg-pause",
            Fault::PgKill => "pg-kill",
            Fault::ServerKill => "server-kill",
            Fault::TwoServers => "two-servers",
            Fault::ClientTimeouts => "client-timeouts",
            Fault::Failover => "failover",
            Fault::FailoverAsync => "failover-async",
            Fault::BrokerPartition => "broker-partition",
            Fault::SpoolOrphan => "spool-orphan",
            Fault::SpoolCapacity => "spool-capacity",
            Fault::SlowClient => "slow-client",
            Fault::ShutdownUnderLoad => "shutdown-under-load",
        }
    }

    /// A stress scenario (see [`stress`]) rather than the workload under a fault.
    fn is_stress(self) -> bool {
        matches!(
            self,
            Fault::SpoolCapacity | Fault::SlowClient | Fault::ShutdownUnderLoad
        )
    }

    /// The deployment the scenario runs on.
    fn layout(self) -> deployment::Layout {
        let servers = match self {
            Fault::ServerKill
            | Fault::TwoServers
            | Fault::Failover
            | Fault::FailoverAsync
            | Fault::BrokerPartition
            | Fault::SpoolOrphan => 2,
            _ => 1,
        };
        let mut layout = deployment::Layout::plain(servers, 6);
        layout.standby = match self {
            Fault::Failover => Some(queen_pg::Replication::Synchronous),
            Fault::FailoverAsync => Some(queen_pg::Replication::Asynchronous),
            _ => None,
        };
        layout.proxies = matches!(self, Fault::BrokerPartition | Fault::SpoolOrphan);
        layout
    }

    /// Injected once per run (a failover uses up the standby, an orphan its server).
    fn once(self) -> bool {
        matches!(
            self,
            Fault::Failover | Fault::FailoverAsync | Fault::SpoolOrphan
        )
    }
}

/// How a scenario runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// The server program to start.
    pub program: ServerProgram,
    /// Length of the fault phase: faults repeat (at least once) until it is over.
    pub duration: Duration,
    /// Clients calling at once.
    pub clients: usize,
    /// Calls per client in one round.
    pub ops_per_round: usize,
    /// Queues the calls spread over.
    pub queues: usize,
    /// Seed of the workload's random choices.
    pub seed: u64,
    /// Client timeout of one call; half the clients of `client-timeouts` use
    /// `short_timeout_ms` instead.
    pub(crate) op_timeout_ms: u64,
    /// The short client timeout (ms) of half the clients of `client-timeouts`.
    pub short_timeout_ms: u64,
    /// Model steps of the search per queue.
    pub budget: u64,
    /// How long PostgreSQL stays paused or down, or a server down, per fault.
    pub(crate) outage: Duration,
    /// Wall-clock limit of the search per round (past it: undecided, not a pass).
    pub(crate) search_limit: Duration,
    /// `leaseSeconds` of the workload's pops: the drain waits the longest lease out.
    pub(crate) lease_seconds: u32,
    /// Where the timeline and history (JSON) of a round that fails the search go, and
    /// the whole history (all rounds and the drain) when an invariant fails.
    pub failures_dir: Option<std::path::PathBuf>,
    /// Progress lines on stderr.
    pub verbose: bool,
    /// How large the stress scenarios are.
    pub stress: stress::StressSizes,
}

impl Options {
    /// The bounded form CI runs (a few seconds of faults per scenario).
    pub fn bounded(program: ServerProgram, seed: u64) -> Options {
        Options {
            program,
            duration: Duration::from_secs(3),
            clients: 4,
            ops_per_round: 15,
            // Fewer calls per queue keep the search small when faults leave many
            // answers unknown (each unknown pop keeps many model states possible).
            queues: 4,
            seed,
            op_timeout_ms: 1000,
            short_timeout_ms: 12,
            budget: 200_000,
            outage: Duration::from_millis(1500),
            search_limit: Duration::from_secs(60),
            lease_seconds: 1,
            failures_dir: None,
            verbose: false,
            stress: stress::StressSizes::bounded(),
        }
    }
}

/// What a scenario did and found.
#[derive(Debug)]
pub struct Report {
    /// The scenario that ran.
    pub fault: Fault,
    /// What was injected, when (ms from the start).
    pub events: Vec<String>,
    /// Rounds of the workload run.
    pub rounds: usize,
    /// Calls made over all rounds.
    pub calls: usize,
    /// Calls with no usable answer.
    pub unknown: usize,
    /// The rounds' verdicts, in order ("linearizable", "violation", "unknown").
    pub verdicts: Vec<&'static str>,
    /// Text of the rounds that did not pass the search.
    pub failures: Vec<String>,
    /// Pushed items by answer.
    pub pushes: audit::PushTally,
    /// The longest time the clients saw no push stored directly (ms).
    pub(crate) store_gap_ms: f64,
    /// The invariants over every round and the final drain.
    pub invariants: InvariantReport,
    /// The drain's calls and how long it took.
    pub(crate) drain_calls: usize,
    /// How long the drain took (ms).
    pub(crate) drain_ms: f64,
    /// Starts of each server process (1 + restarts).
    pub starts: Vec<u32>,
    /// Spooled pushes adopted from dead processes, per the servers' logs.
    pub adopted_logs: usize,
    /// Bad anomalies and failures to run (empty: passed).
    pub problems: Vec<String>,
    /// Rounds whose linearizability search ran out of budget or time ("unknown").
    pub undecided: Vec<String>,
    /// How long the scenario took.
    pub elapsed: Duration,
    /// Every round's calls and the drain's, as the invariants read them (ids as in
    /// their anomalies).
    pub merged: History,
}

impl Report {
    /// A report of `fault` with nothing in it yet.
    pub fn empty(fault: Fault) -> Report {
        Report {
            fault,
            events: vec![],
            rounds: 0,
            calls: 0,
            unknown: 0,
            verdicts: vec![],
            failures: vec![],
            pushes: audit::PushTally::default(),
            store_gap_ms: 0.0,
            invariants: InvariantReport::default(),
            drain_calls: 0,
            drain_ms: 0.0,
            merged: History::default(),
            starts: vec![],
            adopted_logs: 0,
            problems: vec![],
            undecided: vec![],
            elapsed: Duration::ZERO,
        }
    }

    /// Every round shown linearizable and no bad anomaly: an undecided round is not a
    /// pass.
    pub fn passed(&self) -> bool {
        self.problems.is_empty() && self.undecided.is_empty()
    }

    /// No evidence against the broker: no violation, nothing lost, duplicated or
    /// phantom, no panic (undecided rounds allowed).
    pub fn no_bad_anomalies(&self) -> bool {
        self.problems.is_empty()
    }

    /// The report in a few lines for the terminal.
    pub fn summary(&self) -> String {
        if self.fault.is_stress() {
            return self.stress_summary();
        }
        let mut s = format!(
            "fault scenario {}: {} in {:.1} s\n  {} rounds, {} calls ({} unknown), verdicts {:?}; server starts {:?}, spool adoptions logged {}\n  {}; longest time without a push answered queued: {:.0} ms\n  drain: {} calls in {:.1} s\n  {}",
            self.fault.name(),
            if self.passed() { "passed" } else { "FAILED" },
            self.elapsed.as_secs_f64(),
            self.rounds,
            self.calls,
            self.unknown,
            self.verdicts,
            self.starts,
            self.adopted_logs,
            self.pushes.summary(),
            self.store_gap_ms,
            self.drain_calls,
            self.drain_ms / 1000.0,
            self.invariant_lines()
        );
        for e in &self.events {
            s.push_str(&format!("  event: {e}\n"));
        }
        for p in &self.problems {
            s.push_str(&format!("  BAD: {p}\n"));
        }
        for u in &self.undecided {
            s.push_str(&format!("  UNDECIDED: {u}\n"));
        }
        for f in &self.failures {
            s.push_str(&format!("  {}\n", f.replace('\n', "\n  ")));
        }
        s
    }

    /// A stress scenario's verdict, figures and problems.
    fn stress_summary(&self) -> String {
        let mut s = format!(
            "stress scenario {}: {} in {:.1} s\n",
            self.fault.name(),
            if self.passed() { "passed" } else { "FAILED" },
            self.elapsed.as_secs_f64()
        );
        for e in &self.events {
            s.push_str(&format!("  {e}\n"));
        }
        for p in &self.problems {
            s.push_str(&format!("  BAD: {p}\n"));
        }
        s
    }

    /// The invariants' counts (and first bad anomalies), indented.
    fn invariant_lines(&self) -> String {
        let text = self.invariants.summary(&self.merged, 10);
        let mut out = String::new();
        for line in text.lines() {
            out.push_str(&format!("  {line}\n"));
        }
        out.trim_start().to_string()
    }

    /// For `faults --json`: what ran, the verdicts, the drain and the anomaly counts.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "scenario": self.fault.name(),
            "passed": self.passed(),
            "noBadAnomalies": self.no_bad_anomalies(),
            "elapsedMs": self.elapsed.as_millis() as u64,
            "events": self.events,
            "rounds": self.rounds,
            "calls": self.calls,
            "unknownCalls": self.unknown,
            "verdicts": self.verdicts,
            "undecided": self.undecided,
            "problems": self.problems,
            "serverStarts": self.starts,
            "spoolAdoptionsLogged": self.adopted_logs,
            "pushes": {
                "acknowledged": self.pushes.acknowledged,
                "buffered": self.pushes.buffered,
                "duplicate": self.pushes.duplicate,
                "unknown": self.pushes.unknown,
                "longestGapWithoutQueuedMs": self.store_gap_ms,
            },
            "drain": {"calls": self.drain_calls, "ms": self.drain_ms},
            "invariants": self.invariants.to_json(),
        })
    }
}
