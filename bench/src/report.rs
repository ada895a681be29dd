//! Results: one JSON line per workload and round as they finish, then tables for people
//! (every figure with its range and its ratios to the database's limits, then the
//! targets with their verdicts) and one JSON summary line for machines.

use crate::summary::{Bound, Figure, Spread, Verdict};
use crate::target::Database;
use comfy_table::{presets::ASCII_MARKDOWN, Table};
use serde::Serialize;
use serde_json::{json, Value};

/// One workload's outcome in one round.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub workload: String,
    /// The headline figure (msgs/s, rows/s, or ms for latency workloads).
    pub value: f64,
    pub unit: String,
    /// Everything else measured (latencies, counts, parameters, the round).
    pub details: Value,
}

/// The JSON lines of one round's outcomes.
pub fn lines(outcomes: &[Outcome]) {
    for o in outcomes {
        println!("{}", serde_json::to_string(o).expect("serializes"));
    }
}

/// The figures' and the targets' tables, then the summary as one JSON line.
pub fn print(database: &Database, brokers: usize, figures: &[Figure], verdicts: &[Verdict]) {
    println!("\ndatabase: {database}; brokers: {brokers}");
    let mut t = Table::new();
    t.load_style(ASCII_MARKDOWN).set_header([
        "workload",
        "median",
        "min–max",
        "unit",
        "÷ COPY 4 sessions",
        "÷ flush rate",
    ]);
    for f in figures {
        t.add_row([
            f.workload.clone(),
            num(f.value.median),
            range(&f.value),
            f.unit.clone(),
            f.to_bulk_limit.as_ref().map_or(String::new(), ratio),
            f.to_flush_limit.as_ref().map_or(String::new(), ratio),
        ]);
    }
    println!("{t}");
    let mut t = Table::new();
    t.load_style(ASCII_MARKDOWN)
        .set_header(["target", "bound", "median", "min–max", "verdict"]);
    for v in verdicts {
        let bound = match v.bound {
            Bound::AtLeast => "≥",
            Bound::AtMost => "≤",
        };
        t.add_row([
            v.target.to_string(),
            format!("{bound} {} {}", num(v.limit), v.unit),
            v.measured
                .as_ref()
                .map_or("not run".into(), |m| num(m.median)),
            v.measured.as_ref().map_or(String::new(), range),
            match v.met {
                Some(true) => "met".into(),
                Some(false) => "MISSED".into(),
                None => String::new(),
            },
        ]);
    }
    println!("{t}");
    println!(
        "{}",
        json!({"summary": {"database": database, "brokers": brokers, "figures": figures,
                           "targets": verdicts}})
    );
}

/// A figure with as many digits as it needs.
fn num(x: f64) -> String {
    match x.abs() {
        a if a >= 1000.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

fn range(s: &Spread) -> String {
    format!("{}–{}", num(s.min), num(s.max))
}

fn ratio(s: &Spread) -> String {
    format!("{} ({}–{})", num(s.median), num(s.min), num(s.max))
}

/// The scale workload's steps, as a table.
pub fn scale_table(steps: &[crate::scale::Step]) {
    let mut t = Table::new();
    t.load_style(ASCII_MARKDOWN).set_header([
        "retained messages",
        "push µs/msg",
        "pop µs/msg",
        "ack µs/msg",
        "pop µs/msg, 16 partitions written",
        "push msgs/s",
        "drain msgs/s",
    ]);
    for s in steps {
        t.add_row([
            s.retained.to_string(),
            num(s.push_us),
            num(s.pop_us),
            num(s.ack_us),
            num(s.sparse_pop_us),
            num(s.push_rate),
            num(s.drain_rate),
        ]);
    }
    println!("{t}");
}
