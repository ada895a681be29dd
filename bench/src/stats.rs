//! Latency samples and their percentiles.

use std::time::Duration;

/// Collected latencies of one workload.
#[derive(Default, Clone, Debug)]
pub struct Latencies {
    micros: Vec<u64>,
}

impl Latencies {
    pub fn record(&mut self, d: Duration) {
        self.micros.push(d.as_micros() as u64);
    }

    pub fn merge(&mut self, other: Latencies) {
        self.micros.extend(other.micros);
    }

    pub fn clear(&mut self) {
        self.micros.clear();
    }

    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// The mean in milliseconds.
    pub fn mean_ms(&self) -> f64 {
        if self.micros.is_empty() {
            return f64::NAN;
        }
        self.micros.iter().sum::<u64>() as f64 / self.micros.len() as f64 / 1000.0
    }

    /// The `p`-th percentile (0..=100) in milliseconds, nearest-rank.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.micros.is_empty() {
            return f64::NAN;
        }
        let mut v = self.micros.clone();
        v.sort_unstable();
        let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
        v[rank.min(v.len()) - 1] as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut l = Latencies::default();
        for ms in 1..=100 {
            l.record(Duration::from_millis(ms));
        }
        assert_eq!(l.percentile_ms(50.0), 50.0);
        assert_eq!(l.percentile_ms(99.0), 99.0);
        assert_eq!(l.percentile_ms(100.0), 100.0);
    }
}
