//! A failing history as a timeline a person can open: an HTML page with one SVG row per
//! client, each call a bar from invocation to completion (hover for the request and
//! answer). Calls the search could not place next are red, the longest placeable prefix
//! is numbered in its order, unknown answers are hatched grey.

use super::history::{Answer, History};
use super::linearize::{Outcome, Verdict};
use std::collections::{BTreeMap, BTreeSet};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Renders `history` with the verdicts of `outcome` marked.
pub fn html(history: &History, outcome: &Outcome) -> String {
    let mut refused: BTreeMap<usize, String> = BTreeMap::new();
    let mut placed: BTreeMap<usize, usize> = BTreeMap::new();
    let mut bad_keys = BTreeSet::new();
    for k in &outcome.keys {
        if let Verdict::Violation(v) = &k.verdict {
            bad_keys.insert(k.key.clone());
            for (i, why) in &v.refused {
                refused.insert(*i, why.clone());
            }
            for (n, i) in v.prefix.iter().enumerate() {
                placed.insert(*i, n + 1);
            }
        }
    }
    let ops: Vec<_> = history
        .ops
        .iter()
        .filter(|o| bad_keys.is_empty() || bad_keys.contains(&o.key))
        .collect();
    let t0 = ops.iter().map(|o| o.invoke_ms).min().unwrap_or(0);
    let t1 = ops.iter().map(|o| o.complete_ms).max().unwrap_or(t0 + 1);
    let clients = ops.iter().map(|o| o.client).max().map_or(1, |c| c + 1);
    let width = 1400.0;
    let scale = (width - 120.0) / ((t1 - t0).max(1) as f64);
    let row = 34.0;
    let mut svg = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{}'>\n",
        row * clients as f64 + 40.0
    );
    for c in 0..clients {
        let y = 20.0 + row * c as f64;
        svg.push_str(&format!(
            "<text x='4' y='{}' font-size='12'>client {c}</text>\n",
            y + 16.0
        ));
    }
    for o in &ops {
        let x = 80.0 + (o.invoke_ms - t0) as f64 * scale;
        let w = ((o.complete_ms - o.invoke_ms) as f64 * scale).max(3.0);
        let y = 20.0 + row * o.client as f64;
        let (fill, note) = match (&o.answer, refused.get(&o.id)) {
            (_, Some(why)) => ("#e53935", format!("\nREFUSED next: {why}")),
            (Answer::Unknown(_), _) => ("#9e9e9e", String::new()),
            _ if placed.contains_key(&o.id) => ("#43a047", String::new()),
            _ => ("#90caf9", String::new()),
        };
        let body = match &o.answer {
            Answer::Known(r) => r
                .body
                .as_ref()
                .map_or(String::new(), |b| b.to_string().chars().take(600).collect()),
            Answer::Unknown(w) => w.clone(),
        };
        let req_body: String = String::from_utf8_lossy(&o.request.body)
            .chars()
            .take(400)
            .collect();
        svg.push_str(&format!(
            "<g><title>{}\nrequest: {}\nanswer: {}{}</title><rect x='{x:.1}' y='{y}' width='{w:.1}' height='24' fill='{fill}' stroke='#333'/>",
            esc(&o.label()),
            esc(&req_body),
            esc(&body),
            esc(&note)
        ));
        let tag = placed
            .get(&o.id)
            .map_or(format!("#{}", o.id), |n| format!("#{} ({n})", o.id));
        svg.push_str(&format!(
            "<text x='{:.1}' y='{}' font-size='10'>{}</text></g>\n",
            x + 2.0,
            y + 15.0,
            esc(&tag)
        ));
    }
    svg.push_str("</svg>");
    let mut list = String::new();
    for (i, why) in &refused {
        let label = history.ops.get(*i).map_or(String::new(), |o| o.label());
        list.push_str(&format!(
            "<li><b>{}</b><pre>{}</pre></li>\n",
            esc(&label),
            esc(why)
        ));
    }
    format!(
        "<!doctype html><html><head><meta charset='utf-8'><title>queen-conformance: concurrent history</title></head><body>\n\
<h1>Concurrent history: {}</h1>\n<p>{} calls, {} unknown. Green: the longest prefix the search could linearize (its order in brackets); red: calls refused as the next one there; grey: unknown answers; blue: not reached. Hover a bar for its request and answer. Times: ms from {t0}.</p>\n{svg}\n<h2>Refused calls</h2><ul>{list}</ul></body></html>\n",
        outcome.verdict_name(),
        history.ops.len(),
        history.unknown()
    )
}
