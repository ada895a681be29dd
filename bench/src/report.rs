//! Results: a table for people, one JSON line per workload for machines.

use serde::Serialize;
use serde_json::Value;

/// One workload's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub workload: String,
    /// The headline figure (msgs/s, rows/s, or ms for latency workloads).
    pub value: f64,
    pub unit: String,
    /// Everything else measured (latencies, counts, parameters).
    pub details: Value,
}

/// Prints the table and the JSON lines.
pub fn print(outcomes: &[Outcome]) {
    println!("{:<22} {:>14} {:<8} details", "workload", "value", "unit");
    for o in outcomes {
        println!(
            "{:<22} {:>14.1} {:<8} {}",
            o.workload, o.value, o.unit, o.details
        );
    }
    for o in outcomes {
        println!("{}", serde_json::to_string(o).expect("serializes"));
    }
}
