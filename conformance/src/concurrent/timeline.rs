//! A concurrent history as a timeline a person can open: an HTML page with one row per
//! client, each call a bar from invocation to completion, labelled with its operation
//! and outcome (hover for the request and the answer), under a time axis. Calls the
//! search could not place next are red and listed beside the chart with why; the
//! longest placeable prefix is green and numbered in its order; unknown answers are
//! grey. The chart scales to the window and labels never leave their bar, so nothing
//! runs off the page.

use super::history::{Answer, History, Op};
use super::linearize::{Outcome, Verdict};
use queen_reference::wire::{parse_request, Rejection, DEFAULT_POP_TIMEOUT_MS};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Width of the drawing (the page scales it to the window).
const WIDTH: f64 = 1400.0;
/// Left margin for the client names.
const LEFT: f64 = 80.0;
const ROW: f64 = 34.0;
/// Room above the rows for the time axis.
const TOP: f64 = 30.0;

/// What the search said of the calls: refused as the next one (and why), and the order
/// of the longest placeable prefix.
struct Marks {
    refused: BTreeMap<usize, String>,
    placed: BTreeMap<usize, usize>,
    bad_keys: BTreeSet<String>,
}

fn marks(outcome: &Outcome) -> Marks {
    let mut m = Marks {
        refused: BTreeMap::new(),
        placed: BTreeMap::new(),
        bad_keys: BTreeSet::new(),
    };
    for k in &outcome.keys {
        if let Verdict::Violation(v) = &k.verdict {
            m.bad_keys.insert(k.key.clone());
            m.refused.extend(v.refused.iter().cloned());
            for (n, i) in v.prefix.iter().enumerate() {
                m.placed.insert(*i, n + 1);
            }
        }
    }
    m
}

/// The operation and outcome of a call, short enough for its bar.
fn short_label(o: &Op) -> String {
    // Named by the one routing function, so a label never disagrees with the checker.
    let op = match parse_request(&o.request, DEFAULT_POP_TIMEOUT_MS, usize::MAX) {
        Ok(r) => r.name(),
        Err(Rejection::NotFound) => o.request.method.as_str(),
        Err(_) => "bad",
    };
    let outcome = match &o.answer {
        Answer::Unknown(_) => "?".to_string(),
        Answer::Known(r) => match (op, r.status, &r.body) {
            ("pop", 200, Some(b)) => format!("{}", b["messages"].as_array().map_or(0, |m| m.len())),
            ("extend", _, Some(b)) if b["success"] == false => "gone".into(),
            (_, s, _) => s.to_string(),
        },
    };
    format!("{op} {outcome}")
}

/// Tick spacing (ms) giving about ten ticks over `span`.
fn tick_step(span: i64) -> i64 {
    let raw = (span.max(1) as f64 / 10.0).max(1.0);
    let pow = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * pow)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * pow);
    step as i64
}

fn axis(svg: &mut String, t0: i64, t1: i64, scale: f64, height: f64) {
    let step = tick_step(t1 - t0);
    let mut t = 0;
    while t <= t1 - t0 {
        let x = LEFT + t as f64 * scale;
        let _ = writeln!(
            svg,
            "<line x1='{x:.1}' y1='{}' x2='{x:.1}' y2='{height}' stroke='#ddd'/>\
             <text x='{x:.1}' y='{}' font-size='10' text-anchor='middle'>{t} ms</text>",
            TOP - 6.0,
            TOP - 10.0
        );
        t += step;
    }
}

fn bar(svg: &mut String, o: &Op, m: &Marks, t0: i64, scale: f64) {
    let x = LEFT + (o.invoke_ms - t0) as f64 * scale;
    let w = ((o.complete_ms - o.invoke_ms) as f64 * scale).max(3.0);
    let y = TOP + ROW * o.client as f64;
    let (fill, note) = match (&o.answer, m.refused.get(&o.id)) {
        (_, Some(why)) => ("#e53935", format!("\nREFUSED as the next call: {why}")),
        (Answer::Unknown(_), _) => ("#9e9e9e", String::new()),
        _ if m.placed.contains_key(&o.id) => ("#43a047", String::new()),
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
    let mut label = short_label(o);
    if let Some(n) = m.placed.get(&o.id) {
        label = format!("({n}) {label}");
    }
    // The label is clipped to its bar, so it never runs over its neighbours or the page.
    let _ = write!(
        svg,
        "<g><title>{}\nrequest: {}\nanswer: {}{}</title>\
         <clipPath id='c{id}'><rect x='{x:.1}' y='{y}' width='{w:.1}' height='24'/></clipPath>\
         <rect x='{x:.1}' y='{y}' width='{w:.1}' height='24' fill='{fill}' stroke='#333'/>\
         <text x='{:.1}' y='{}' font-size='10' clip-path='url(#c{id})'>{}</text></g>\n",
        esc(&o.label()),
        esc(&req_body),
        esc(&body),
        esc(&note),
        x + 2.0,
        y + 15.0,
        esc(&label),
        id = o.id,
    );
}

/// Renders `history` with the verdicts of `outcome` marked.
pub fn html(history: &History, outcome: &Outcome) -> String {
    let m = marks(outcome);
    let ops: Vec<&Op> = history
        .ops
        .iter()
        .filter(|o| m.bad_keys.is_empty() || m.bad_keys.contains(&o.key))
        .collect();
    let t0 = ops.iter().map(|o| o.invoke_ms).min().unwrap_or(0);
    let t1 = ops.iter().map(|o| o.complete_ms).max().unwrap_or(t0 + 1);
    let clients = ops.iter().map(|o| o.client).max().map_or(1, |c| c + 1);
    let scale = (WIDTH - LEFT - 20.0) / ((t1 - t0).max(1) as f64);
    let height = TOP + ROW * clients as f64 + 10.0;
    let mut svg = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {WIDTH} {height}' \
         preserveAspectRatio='xMinYMin meet'>\n"
    );
    axis(&mut svg, t0, t1, scale, height);
    for c in 0..clients {
        let _ = writeln!(
            svg,
            "<text x='4' y='{}' font-size='12'>client {c}</text>",
            TOP + ROW * c as f64 + 16.0
        );
    }
    for o in &ops {
        bar(&mut svg, o, &m, t0, scale);
    }
    svg.push_str("</svg>");
    let mut list = String::new();
    for (i, why) in &m.refused {
        let label = history.ops.get(*i).map_or(String::new(), |o| o.label());
        let _ = writeln!(
            list,
            "<li><b>{}</b><pre>{}</pre></li>",
            esc(&label),
            esc(why)
        );
    }
    if list.is_empty() {
        list = "<li>none</li>".into();
    }
    format!(
        "<!doctype html><html><head><meta charset='utf-8'>\
<title>queen-conformance: concurrent history</title><style>\
body{{font-family:sans-serif;margin:1em;}} .page{{display:flex;gap:1em;align-items:flex-start}}\
.chart{{flex:1 1 auto;min-width:0}} svg{{width:100%;height:auto;display:block}}\
aside{{flex:0 0 28em;max-width:40%;overflow-wrap:anywhere}}\
pre{{white-space:pre-wrap;overflow-wrap:anywhere}}</style></head><body>\n\
<h1>Concurrent history: {}</h1>\n<p>{} calls, {} unknown. Green: the longest prefix the \
search could linearize (its order in brackets); red: calls refused as the next one there; \
grey: unknown answers; blue: not reached. Each bar names its operation and outcome (a pop: \
how many messages; an extend: <i>gone</i> when refused); hover for the request and answer. \
Times: ms from the first call.</p>\n<div class='page'><div class='chart'>{svg}</div>\n\
<aside><h2>Refused calls</h2><ul>{list}</ul></aside></div></body></html>\n",
        outcome.verdict_name(),
        history.ops.len(),
        history.unknown()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use queen_reference::wire::{HttpRequest, HttpResponse};

    #[test]
    fn ticks_are_round_and_about_ten() {
        assert_eq!(tick_step(1000), 100);
        assert_eq!(tick_step(2300), 500);
        assert_eq!(tick_step(7), 1);
        assert_eq!(tick_step(45_000), 5000);
    }

    fn call(request: HttpRequest, answer: Answer) -> Op {
        Op {
            id: 0,
            client: 0,
            key: "q".into(),
            request,
            invoke_ms: 0,
            complete_ms: 1,
            answer,
        }
    }

    fn known(status: u16, body: Option<serde_json::Value>) -> Answer {
        Answer::Known(HttpResponse { status, body })
    }

    #[test]
    fn a_label_names_the_operation_by_its_route_and_the_outcome_briefly() {
        use serde_json::json;
        let pop = HttpRequest::get("/api/v1/pop/queue/q", &[]);
        let two = json!({"messages": [{}, {}]});
        assert_eq!(
            short_label(&call(pop.clone(), known(200, Some(two)))),
            "pop 2"
        );
        assert_eq!(
            short_label(&call(pop, Answer::Unknown("timeout".into()))),
            "pop ?"
        );
        let extend = HttpRequest::post(
            "/api/v1/lease/01a3185c-5000-7000-8000-000000000001/extend",
            &json!({}),
        );
        let gone = json!({"success": false});
        assert_eq!(
            short_label(&call(extend, known(200, Some(gone)))),
            "extend gone"
        );
        // A queue named like a route is still the route it was sent to.
        let push = HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": "pop"}]}));
        assert_eq!(short_label(&call(push, known(201, None))), "push 201");
        let ack = HttpRequest::post("/api/v1/ack/batch", &json!({"acknowledgments": []}));
        assert_eq!(short_label(&call(ack, known(200, None))), "ack 200");
        let bad = HttpRequest::post("/api/v1/push", &json!({"items": "no"}));
        assert_eq!(short_label(&call(bad, known(400, None))), "bad 400");
    }
}
