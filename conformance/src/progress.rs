//! A one-line progress bar on stderr for long runs; silent when stderr is not a
//! terminal (CI logs get the summary only).

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

pub struct Progress {
    enabled: bool,
    start: Instant,
    line: Mutex<()>,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled: enabled && std::io::stderr().is_terminal(),
            start: Instant::now(),
            line: Mutex::new(()),
        }
    }

    /// Redraws the bar: `what` done of `total`.
    pub fn update(&self, what: &str, done: u64, total: u64) {
        if !self.enabled {
            return;
        }
        let _g = self.line.lock();
        let width = 30usize;
        let filled = if total == 0 {
            width
        } else {
            (done as usize * width / total as usize).min(width)
        };
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "\r[{}{}] {done}/{total} {what}  {:.1} s ",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.start.elapsed().as_secs_f64()
        );
        let _ = err.flush();
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if self.enabled {
            let _ = write!(std::io::stderr(), "\r{}\r", " ".repeat(72));
        }
    }
}
