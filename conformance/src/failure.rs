//! Why a case, a lockstep sequence or a run's entry failed: the one verdict every floor
//! from the session up speaks. It sits on the bottom floor so that the session, which
//! produces most failures, need not import the cases that report them.

use crate::rules::{level_of, Level, RuleId};
use queen_reference::checker::Divergence;
use queen_reference::finding::Finding;

/// Why a case failed.
#[derive(Clone, Debug)]
pub enum Failure {
    /// The broker answered something no allowed behaviour produces.
    Diverged {
        /// Index of the exchange in the transcript.
        step: usize,
        /// The model's allowed answers there and how the broker's differs.
        divergence: Box<Divergence>,
    },
    /// The model could not decide (too many possible states): never a pass.
    Inconclusive {
        /// Index of the exchange in the transcript.
        step: usize,
        /// Why the model could not decide.
        why: String,
    },
    /// A case's own assertion on top of the model (e.g. a wake-up time, POP-11).
    Assertion {
        /// What the case expected and what it got.
        message: String,
        /// The rule ids the assertion checks.
        rules: Vec<RuleId>,
    },
    /// A timing bound missed (a wake-up, a hold, a drain) in the case's run and again in
    /// its second run: a stall of a loaded machine can miss one once, a broker that
    /// misses it misses it every time, so the runner runs such a case twice.
    Late {
        /// What the case expected and how long it took.
        message: String,
        /// The rule ids the bound checks.
        rules: Vec<RuleId>,
    },
    /// The broker could not be reached or answered something that is not HTTP/JSON.
    Transport(String),
    /// The case did not finish in time; `waiting`: the requests it had sent and had no
    /// answer to (as curl lines).
    Timeout {
        /// The time allowed (s).
        secs: u64,
        /// The requests still unanswered, as curl lines.
        waiting: Vec<String>,
    },
    /// Every answer was allowed, but only with findings on the case's own rules (answer-
    /// only differences, or PROJECT points decided otherwise when the model is not
    /// strict). Only PROJECT ones: the broker "differs on project-resolved points".
    Findings(Vec<Finding>),
    /// The broker stopped answering during the run; this case was cut short.
    TargetDown(String),
}

impl Failure {
    /// A short kind name for reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Diverged { .. } => "divergence",
            Failure::Inconclusive { .. } => "inconclusive",
            Failure::Assertion { .. } => "assertion",
            Failure::Late { .. } => "timing",
            Failure::Transport(_) => "transport",
            Failure::Timeout { .. } => "timeout",
            Failure::Findings(_) if self.is_project_only() => "project-difference",
            Failure::Findings(_) => "finding",
            Failure::TargetDown(_) => "target-down",
        }
    }

    /// The rule ids this failure names.
    pub fn rules(&self) -> Vec<RuleId> {
        match self {
            Failure::Diverged { divergence, .. } => divergence.rules.clone(),
            Failure::Assertion { rules, .. } | Failure::Late { rules, .. } => rules.clone(),
            Failure::Findings(d) => {
                let mut r: Vec<RuleId> = d.iter().map(|d| d.rule).collect();
                r.sort();
                r.dedup();
                r
            }
            _ => vec![],
        }
    }

    /// How binding this failure is, for a case of level `case`: the level of the rules
    /// whose checks failed (a case's verdict is about the rules it broke, so a PROJECT
    /// rule never fails a SEED case as a SEED failure); a server error is SEED whatever
    /// the point, since no rule lets a broker answer 5xx to a request it must handle.
    pub fn level(&self, case: Level) -> Level {
        match self {
            Failure::Diverged { divergence, .. } if divergence.actual.status >= 500 => Level::Seed,
            Failure::Diverged { divergence, .. } => level_of(&divergence.rules),
            Failure::Findings(d) => d.iter().map(|f| f.level).min().unwrap_or(case),
            // A case's own assertion is as binding as the case says (a PROJECT case may
            // assert the PROJECT half of a two-level rule), and no more than its rules.
            Failure::Assertion { rules, .. } | Failure::Late { rules, .. } if !rules.is_empty() => {
                level_of(rules).max(case)
            }
            _ => case,
        }
    }

    /// One line.
    pub fn headline(&self) -> String {
        match self {
            Failure::Diverged { step, divergence } => {
                let allowed = allowed_statuses(&divergence.expected);
                let what = if allowed == divergence.actual.status.to_string() {
                    format!(
                        "{} with a body the model does not allow",
                        divergence.actual.status
                    )
                } else {
                    format!(
                        "{} where the model allows {allowed}",
                        divergence.actual.status
                    )
                };
                format!(
                    "exchange #{}: {} {} answered {what}",
                    step + 1,
                    divergence.request.method,
                    divergence.request.path,
                )
            }
            Failure::Inconclusive { step, why } => {
                format!("exchange #{}: the model cannot decide: {why}", step + 1)
            }
            Failure::Assertion { message, .. } | Failure::Late { message, .. } => message.clone(),
            Failure::Transport(e) => format!("transport: {e}"),
            Failure::Timeout { secs, waiting } if waiting.is_empty() => {
                format!("did not finish within {secs} s")
            }
            Failure::Timeout { secs, waiting } => format!(
                "did not finish within {secs} s, waiting for an answer to: {}",
                waiting.join("; ")
            ),
            Failure::Findings(_) if self.is_project_only() => format!(
                "differs on project-resolved points: {}",
                join(&self.rules())
            ),
            Failure::Findings(_) => format!(
                "answers differ from the protocol on: {}",
                join(&self.rules())
            ),
            Failure::TargetDown(why) => why.clone(),
        }
    }

    /// Whether this is only a departure from PROJECT decisions (level PROJECT whatever
    /// the case's own level).
    fn is_project_only(&self) -> bool {
        matches!(self, Failure::Findings(d) if d.iter().all(|f| f.level == Level::Project))
    }

    /// The full explanation (several lines).
    pub fn details(&self) -> String {
        match self {
            Failure::Diverged { divergence, .. } => divergence.to_string(),
            Failure::Findings(d) => {
                let mut s = self.headline();
                for x in d {
                    s.push_str(&format!("\n  {x}"));
                }
                s
            }
            other => other.headline(),
        }
    }
}

fn allowed_statuses(expected: &[queen_reference::wire::HttpResponse]) -> String {
    let mut s: Vec<String> = expected.iter().map(|e| e.status.to_string()).collect();
    s.dedup();
    if s.is_empty() {
        "nothing (no state of the model is consistent)".into()
    } else {
        s.join(" or ")
    }
}

/// Rule ids as `A, B`.
pub fn join(rules: &[RuleId]) -> String {
    rules
        .iter()
        .map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.details())
    }
}

/// An explicit assertion failure naming rules.
pub fn fail(message: impl Into<String>, rules: &[RuleId]) -> Failure {
    Failure::Assertion {
        message: message.into(),
        rules: rules.to_vec(),
    }
}

/// Fails the check unless `cond`, naming the rule (or `[rules]`) it checks: an
/// assertion built from the format arguments only when the check fails.
///
/// `ensure!(r.len() == 3, PUSH_1, "3 items, {} results", r.len())?` and
/// `ensure!(done, [ACK_0, ACK_6], "status false is a failure")`.
macro_rules! ensure {
    ($cond:expr, [$($rule:expr),+ $(,)?], $($message:tt)+) => {
        if $cond {
            Ok(())
        } else {
            Err($crate::failure::Failure::Assertion {
                message: format!($($message)+),
                rules: vec![$($rule),+],
            })
        }
    };
    ($cond:expr, $rule:expr, $($message:tt)+) => {
        $crate::failure::ensure!($cond, [$rule], $($message)+)
    };
}
pub(crate) use ensure;

/// Like [`ensure!`], for a timing bound: a [`Failure::Late`], which the runner confirms
/// with a second run of the case before it reports it.
macro_rules! ensure_timely {
    ($cond:expr, $rule:expr, $($message:tt)+) => {
        if $cond {
            Ok(())
        } else {
            Err($crate::failure::late(format!($($message)+), &[$rule]))
        }
    };
}
pub(crate) use ensure_timely;

/// A missed timing bound naming rules (see [`Failure::Late`]).
pub fn late(message: impl Into<String>, rules: &[RuleId]) -> Failure {
    Failure::Late {
        message: message.into(),
        rules: rules.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{ACK_0, ACK_6, PUSH_1};

    #[test]
    fn a_failed_check_names_the_rules_it_checks() {
        let n = 2;
        let one: Result<(), Failure> = ensure!(n == 3, PUSH_1, "3 items, {n} results");
        let Err(Failure::Assertion { message, rules }) = one else {
            panic!("a false check fails");
        };
        assert_eq!(
            (message.as_str(), rules),
            ("3 items, 2 results", vec![PUSH_1])
        );
        let two: Result<(), Failure> = ensure!(false, [ACK_0, ACK_6], "status false");
        assert_eq!(two.unwrap_err().rules(), [ACK_0, ACK_6]);
        let held: Result<(), Failure> = ensure!(n == 2, PUSH_1, "never built");
        assert!(held.is_ok());
    }
}
