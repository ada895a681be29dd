//! The progress bar of a run, on stderr through `indicatif`: one bar whose length and
//! message follow the phase (cases, lockstep sequences, the concurrent scenario). It
//! redraws in place and clears itself, so it never leaves stale text behind, and it is
//! hidden when stderr is not a terminal (CI logs get the summary only). A spinner covers
//! the start, while the target is started and probed.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// The run's progress bar on stderr (hidden when stderr is not a terminal).
pub(crate) struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar on stderr when `enabled` and stderr is a terminal; hidden otherwise.
    pub fn new(enabled: bool) -> Progress {
        let target = if enabled && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("[{bar:30}] {pos}/{len} {msg}  {elapsed_precise}")
                .expect("a valid template")
                .progress_chars("#>-"),
        );
        Progress { bar }
    }

    /// A spinner with `message` until [`Progress::finish`] (for work of unknown length).
    pub(crate) fn spinner(enabled: bool, message: &str) -> Progress {
        let p = Progress::new(enabled);
        p.bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}  {elapsed}").expect("a valid template"),
        );
        p.bar.set_message(message.to_string());
        p.bar.enable_steady_tick(Duration::from_millis(120));
        p
    }

    /// Redraws the bar: `done` of `total` in phase `what`.
    pub(crate) fn update(&self, what: &str, done: u64, total: u64) {
        self.bar.set_length(total);
        self.bar.set_position(done);
        if self.bar.message() != what {
            self.bar.set_message(what.to_string());
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
