//! Throughput of the reference model on one core: push, pop and ack cycles.
//!
//! `cargo bench -p queen-reference --bench model`, under the conformance CLI's allocator
//! (mimalloc). The groups:
//! * `model/cycle`: one push, one pop, one ack through the model's own operations
//!   (ids already resolved): the cost of the protocol logic itself, on a model holding
//!   at most [`HISTORY`] messages (then a fresh one takes over, untimed).
//! * `model/cycle_batch10`: the same with 10 messages per call.
//! * `model/cycle_unbounded`: `model/cycle` on one model for the whole run. The model
//!   keeps every message (a log), so this one grows by millions of messages while it
//!   is measured, and a good part of what it times is the memory growing (page faults,
//!   allocator); how much depends on how many iterations criterion picks.
//! * `engine/http_cycle`: the same three requests as HTTP bodies through the engine
//!   (parsing, id resolution and rendering included).
//! * `checker/transcript`: the conformance checker (`Checker::step`) verifying a
//!   recorded transcript of 1,000 such cycles (3,000 exchanges) from a fresh start:
//!   what checking a broker's answers costs per exchange, learning every id.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use queen_reference::checker::Checker;
use queen_reference::choice::Ctx;
use queen_reference::engine::Engine;
use queen_reference::model::*;
use queen_reference::policy::Policy;
use queen_reference::time::Stamp;
use queen_reference::wire::*;
use serde_json::json;
use std::hint::black_box;

/// The allocator the conformance CLI runs the model and the checker with
/// (`conformance/src/main.rs`), so these figures are what the CLI gets.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::{Duration, Instant};

fn item(i: u64, partition: &str) -> PushItem {
    PushItem {
        queue: "bench".into(),
        partition: partition.to_string(),
        payload: Payload::Given(queen_reference::wire::RawJson::from_value(&json!({"n": i}))),
        transaction_id: Some(format!("t{i}")),
        trace_id: None,
        producer_sub: None,
    }
}

/// One push, one pop and one ack of `n` messages each, on the model's operations.
fn cycle(st: &mut State, policy: &Policy, pop: &Op, now: i64, seq: &mut u64, n: u64) -> usize {
    let mut ctx = Ctx::policy(Stamp::exact(now), policy);
    let mut minter = |_i: usize| unreachable!("every item has a transactionId");
    let mut hints = Hints {
        minter: &mut minter,
        pop_order: None,
    };
    // One partition for the whole batch (that of its last message), so the pop and
    // the ack see all of it.
    let partition = format!("p{}", (*seq + n) % 16);
    let items: Vec<PushItem> = (0..n)
        .map(|_| {
            *seq += 1;
            item(*seq, &partition)
        })
        .collect();
    apply(st, &Op::Push(items), &mut hints, &mut ctx);
    let Outcome::Pop(p) = apply(st, pop, &mut hints, &mut ctx) else {
        panic!("nothing delivered")
    };
    let acks: Vec<AckIn> = p
        .messages
        .iter()
        .map(|&(ph, off)| AckIn {
            transaction_id: st.part(ph).unwrap().at(off).transaction_id.clone(),
            part: Some(ph),
            status: AckStatus::Completed,
            group: QUEUE_MODE.into(),
            lease: p.lease.map_or(LeaseRef::Absent, LeaseRef::Known),
            error: None,
        })
        .collect();
    let Outcome::Ack(r) = apply(st, &Op::Ack(acks), &mut hints, &mut ctx) else {
        panic!()
    };
    assert!(r.iter().all(|a| a.result.success));
    r.len()
}

/// The pop of `n` messages, built once, as a consumer loop would.
fn pop_op(n: u64) -> Op {
    Op::Pop(PopRequest {
        route: PopRoute::Queue("bench".into()),
        query: PopQuery {
            batch: n as u32,
            ..PopQuery::defaults(30_000)
        },
    })
}

/// Messages a model holds at most in the bounded groups before a fresh one replaces it.
const HISTORY: u64 = 100_000;

fn bench(c: &mut Criterion) {
    let policy = Policy::default();
    for (name, n) in [("model/cycle", 1u64), ("model/cycle_batch10", 10)] {
        let mut g = c.benchmark_group(name);
        // push + pop + ack of n messages each: 3n message-operations per cycle.
        g.throughput(Throughput::Elements(3 * n));
        let mut st = State::new();
        let mut seq = 0;
        let mut now = 1_800_000_000_000i64;
        let pop = pop_op(n);
        g.bench_function("push_pop_ack", |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                let mut done = 0;
                while done < iters {
                    if seq >= HISTORY {
                        // Untimed: dropping the full model and starting a fresh one.
                        st = State::new();
                        seq = 0;
                    }
                    let chunk = (iters - done).min((HISTORY - seq).div_ceil(n));
                    let started = Instant::now();
                    for _ in 0..chunk {
                        now += 1;
                        black_box(cycle(&mut st, &policy, &pop, now, &mut seq, n));
                    }
                    timed += started.elapsed();
                    done += chunk;
                }
                timed
            })
        });
        g.finish();
    }
    {
        let n = 1u64;
        let mut g = c.benchmark_group("model/cycle_unbounded");
        // push + pop + ack of n messages each: 3n message-operations per cycle.
        g.throughput(Throughput::Elements(3 * n));
        let mut st = State::new();
        let mut seq = 0;
        let mut now = 1_800_000_000_000i64;
        let pop = pop_op(n);
        g.bench_function("push_pop_ack", |b| {
            b.iter(|| {
                now += 1;
                black_box(cycle(&mut st, &policy, &pop, now, &mut seq, n))
            })
        });
        g.finish();
    }

    let mut g = c.benchmark_group("engine/http_cycle");
    g.throughput(Throughput::Elements(3));
    let mut e = Engine::default();
    let mut now = 1_800_000_000_000i64;
    let mut i = 0u64;
    g.bench_function("push_pop_ack", |b| {
        b.iter(|| {
            now += 1;
            i += 1;
            let push = HttpRequest::post("/api/v1/push", &json!({"items": [{"queue": "bench", "partition": format!("p{}", i % 16), "transactionId": format!("t{i}"), "payload": {"n": i}}]}));
            e.handle(&push, now);
            let r = e.handle(&HttpRequest::get("/api/v1/pop/queue/bench", &[("batch", "1")]), now);
            let m = &r.body.unwrap()["messages"][0];
            let ack = HttpRequest::post("/api/v1/ack", &json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}));
            black_box(e.handle(&ack, now))
        })
    });
    g.finish();
}

/// A transcript of `cycles` push/pop/ack exchanges answered by the engine, with the
/// time each was answered at.
fn transcript(cycles: u64) -> Vec<(HttpRequest, HttpResponse, i64)> {
    let mut e = Engine::default();
    let mut now = 1_800_000_000_000i64;
    let mut out = Vec::new();
    for i in 0..cycles {
        now += 1;
        let push = HttpRequest::post(
            "/api/v1/push",
            &json!({"items": [{"queue": "bench", "partition": format!("p{}", i % 16), "transactionId": format!("t{i}"), "payload": {"n": i}}]}),
        );
        let r = e.handle(&push, now);
        out.push((push, r, now));
        let pop = HttpRequest::get("/api/v1/pop/queue/bench", &[("batch", "1")]);
        let r = e.handle(&pop, now);
        let m = r.body.as_ref().unwrap()["messages"][0].clone();
        out.push((pop, r, now));
        let ack = HttpRequest::post(
            "/api/v1/ack",
            &json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}),
        );
        let r = e.handle(&ack, now);
        out.push((ack, r, now));
    }
    out
}

fn bench_checker(c: &mut Criterion) {
    let t = transcript(1000);
    let mut g = c.benchmark_group("checker/transcript");
    g.throughput(Throughput::Elements(t.len() as u64));
    g.sample_size(10);
    g.bench_function("push_pop_ack_1000_cycles", |b| {
        b.iter(|| {
            let mut checker = Checker::new();
            for (req, resp, at) in &t {
                let worlds = checker
                    .step(req, *at, *at, resp)
                    .expect("the engine's answers are allowed");
                assert_eq!(worlds, 1, "every answer pins the state down");
            }
            black_box(checker.worlds().len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench, bench_checker);
criterion_main!(benches);
