//! The machine's own state during a workload: how much CPU time it spent, and how much
//! the host withheld from it (`steal`: a virtual machine's vCPU ready to run but not
//! run). On a shared machine a throughput dip or a latency spike often comes with steal;
//! every outcome carries these figures so that a reader can tell. Linux only
//! (`/proc/stat`); elsewhere they are absent.

use serde_json::{json, Value};

/// CPU time so far, in seconds, summed over the machine's CPUs.
pub struct CpuTimes {
    /// user, nice, system, irq and softirq.
    busy: f64,
    steal: f64,
}

pub fn cpu_times() -> Option<CpuTimes> {
    parse(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// `{"busy_s", "steal_s"}` since `before`, or null where they cannot be read.
pub fn since(before: Option<CpuTimes>) -> Value {
    match (before, cpu_times()) {
        (Some(a), Some(b)) => json!({"busy_s": round2(b.busy - a.busy),
                                     "steal_s": round2(b.steal - a.steal)}),
        _ => Value::Null,
    }
}

fn parse(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // user nice system idle iowait irq softirq steal ...; USER_HZ is 100 on Linux.
    let at = |i: usize| f.get(i).copied().unwrap_or(0.0) / 100.0;
    Some(CpuTimes {
        busy: at(0) + at(1) + at(2) + at(5) + at(6),
        steal: at(7),
    })
}

/// CPU time (user + system) process `pid` has used so far, in seconds.
pub fn process_cpu(pid: u32) -> Option<f64> {
    parse_process(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_process(stat: &str) -> Option<f64> {
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after the name.
    let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Seconds to two decimals: `/proc/stat` counts hundredths.
fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_and_steal_come_from_the_aggregate_line() {
        let stat = "cpu  500 20 300 9000 40 5 15 120 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n";
        let t = parse(stat).expect("parsed");
        // user + nice + system + irq + softirq = 840 hundredths; steal 120.
        assert_eq!(round2(t.busy), 8.4);
        assert_eq!(round2(t.steal), 1.2);
    }

    #[test]
    fn a_process_cpu_time_is_its_user_and_system_ticks() {
        let stat = "1234 (queen server) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 8 0";
        assert_eq!(parse_process(stat), Some(3.0));
    }

    #[test]
    fn nothing_is_read_without_an_aggregate_line() {
        assert!(parse("intr 1\nctxt 2\n").is_none());
    }
}
