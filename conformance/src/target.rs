//! Where the broker is and what the model must allow for it: one [`Target`] (its URLs,
//! client, tokens, database and health) shared by every session of a run, and the
//! [`CheckSettings`] each session's model is built with.

use crate::database::Database;
use crate::health::Health;
use queen_reference::finding::Accept;
use queen_reference::time::Millis;
use queen_reference::wire::*;
use std::time::Duration;

/// How the model is told about the broker: clock skew and the broker's limits.
#[derive(Clone, Debug)]
pub struct CheckSettings {
    /// Milliseconds the broker's clock may differ from ours.
    pub skew_ms: Millis,
    /// The broker's default long-poll `timeout` (its `DEFAULT_TIMEOUT`).
    pub default_timeout_ms: u64,
    /// The broker's body limit in bytes (413 above it, PUSH-8).
    pub body_limit: usize,
    /// Hold the broker to every PROJECT decision (`--strict`; our own tests). When
    /// false the model accepts departures on PROJECT points and the session collects
    /// them as findings for the report.
    pub strict_project: bool,
    /// An answer that differs only in what it says is a finding and the case goes on
    /// (`--keep-going`, the default against `--target`); else it ends the case.
    pub keep_going: bool,
    /// Deviations declared known (`--accept RULE-ID[:kind]`): allowed everywhere.
    pub accept: Vec<Accept>,
    /// The broker has authentication on (section 14): what each of the suite's tokens
    /// stands for. `None`: it is off and no token is sent.
    pub auth: Option<std::sync::Arc<TokenBook>>,
    /// RET-3: the broker's retention interval in ms (`--retention-interval-ms`).
    pub retention_lag_ms: Millis,
    /// How long a request may go unanswered before it is a finding of its own
    /// (`--request-timeout-s`); a long poll gets its `timeout` on top.
    pub request_timeout_ms: u64,
}

impl CheckSettings {
    /// The model of a fresh broker judged as these settings say, naming the cause of an
    /// answer no allowed behaviour explains.
    pub fn checker(&self) -> queen_reference::checker::Checker {
        let mut c = queen_reference::checker::Checker::new();
        c.skew_ms = self.skew_ms;
        c.default_timeout_ms = self.default_timeout_ms;
        c.body_limit = self.body_limit;
        c.strict_project = self.strict_project;
        c.keep_going = self.keep_going;
        c.accept = self.accept.clone();
        c.auth = self.auth.clone();
        c.diagnose = true;
        c.set_retention_lag(self.retention_lag_ms);
        c
    }
}

impl Default for CheckSettings {
    fn default() -> Self {
        CheckSettings {
            skew_ms: 5,
            default_timeout_ms: DEFAULT_POP_TIMEOUT_MS,
            body_limit: 16 << 20,
            strict_project: true,
            keep_going: false,
            accept: Vec::new(),
            auth: None,
            retention_lag_ms: queen_reference::model::retention::DEFAULT_RETENTION_LAG_MS,
            request_timeout_ms: 15_000,
        }
    }
}

/// Where the broker is and how to talk to it; shared by every session of a run.
#[derive(Clone, Debug)]
pub struct Target {
    /// The broker's base URL.
    pub url: String,
    /// Further brokers of the same system (`--target A,B,...`): requests go round robin
    /// over `url` and these, so one session's calls reach different brokers.
    pub more: Vec<String>,
    /// The round robin's position, shared by the clones of this target.
    turn: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// Every request to this one broker (its index, modulo the count) instead.
    pub(crate) pin: Option<usize>,
    /// The HTTP client the requests go through.
    pub client: reqwest::Client,
    /// How the answers are checked.
    pub settings: CheckSettings,
    /// The broker's database, when the suite may stop and start it (`database-control`).
    pub database: Option<Database>,
    /// Whether the broker still answers, shared by every session of the run.
    pub health: std::sync::Arc<Health>,
    /// The tokens the suite holds when the broker has authentication on.
    pub tokens: Option<std::sync::Arc<crate::auth::Tokens>>,
}

impl Target {
    /// A target at `url` with these settings and a fresh HTTP client.
    pub fn new(url: &str, settings: CheckSettings) -> Target {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .build()
            .expect("an HTTP client without TLS builds");
        let mut urls = url
            .split(',')
            .map(|u| u.trim().trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty());
        Target {
            url: urls.next().unwrap_or_default(),
            more: urls.collect(),
            turn: Default::default(),
            pin: None,
            client,
            settings,
            database: None,
            health: Default::default(),
            tokens: None,
        }
    }

    /// Every broker's base URL.
    pub fn urls(&self) -> Vec<&str> {
        std::iter::once(self.url.as_str())
            .chain(self.more.iter().map(String::as_str))
            .collect()
    }

    /// The broker the next request goes to.
    pub fn base(&self) -> &str {
        if self.more.is_empty() {
            return &self.url;
        }
        let i = match self.pin {
            Some(k) => k,
            None => self.turn.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        match i % (self.more.len() + 1) {
            0 => &self.url,
            k => &self.more[k - 1],
        }
    }

    /// One target per broker, sharing everything else (clients of the concurrent
    /// workload each keep to one broker, spread over them).
    pub fn each(&self) -> Vec<Target> {
        self.urls()
            .into_iter()
            .map(|u| Target {
                url: u.to_string(),
                more: vec![],
                turn: Default::default(),
                pin: None,
                ..self.clone()
            })
            .collect()
    }

    /// `req` with the suite's default token (admin) when it names none and the broker
    /// has authentication on: every request the suite sends goes through here.
    pub(crate) fn authorized(&self, mut req: HttpRequest) -> HttpRequest {
        if let (None, Some(t)) = (&req.bearer, &self.tokens) {
            req.bearer = Some(t.admin.clone());
        }
        req
    }
}
