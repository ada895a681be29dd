//! Why a run fails, one reason at a time: a typed list, so that `--fix` judges a run
//! again by what each reason is rather than by matching its text, while the reports
//! still print each reason as one line.

use crate::rules::Level;
use queen_reference::finding::Finding;
use std::fmt;

/// One reason the run fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The broker stopped answering during the run (exit status 3): why, as observed.
    TargetDown(String),
    /// A case listed as an expected failure passed: the list is out of date.
    StalePass {
        /// The case's id.
        id: String,
    },
    /// A case failed at a level that fails the run.
    CaseFailed {
        /// The case's id.
        id: String,
        /// The level of its rules.
        level: Level,
    },
    /// A departure from the protocol that is not accepted and fails the run at its level.
    Finding(Finding),
    /// Every case was skipped or left out.
    NothingRan,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::TargetDown(why) => f.write_str(why),
            Problem::StalePass { id } => {
                write!(f, "{id} passed but is listed as an expected failure")
            }
            Problem::CaseFailed { id, level } => write!(f, "{id} failed [{level}]"),
            Problem::Finding(x) => {
                write!(f, "finding {} [{}] {}: {}", x.rule, x.level, x.kind, x.what)
            }
            Problem::NothingRan => f.write_str("no case was executed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::PUSH_7;
    use queen_reference::finding::Kind;

    #[test]
    fn each_problem_reads_as_the_line_the_reports_print() {
        let finding = Finding::new(PUSH_7, Kind::State, "lost a message").at_level(Level::Seed);
        let lines: Vec<String> = [
            Problem::TargetDown("the target stopped answering".into()),
            Problem::StalePass {
                id: "pop-6/x".into(),
            },
            Problem::CaseFailed {
                id: "ack-1/y".into(),
                level: Level::Project,
            },
            Problem::Finding(finding),
            Problem::NothingRan,
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            lines,
            [
                "the target stopped answering",
                "pop-6/x passed but is listed as an expected failure",
                "ack-1/y failed [PROJECT]",
                "finding PUSH-7 [SEED] state: lost a message",
                "no case was executed",
            ]
        );
    }
}
