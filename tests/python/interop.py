#!/usr/bin/env python3
"""Interop check: the official Python client (queen-mq, unchanged) against our server.

Usage: interop.py URL   (or QUEEN_URL=... interop.py)
       QUEEN_INTEROP_WIRE=1 also prints every HTTP exchange on success.
       QUEEN_TOKEN=JWT QUEEN_TOKEN_SUB=SUB: the broker has authentication on; the client
       sends the token (its `bearer_token` option), every popped message must carry SUB
       as its producerSub (AUTH-2), and a push without the token must be refused 401.

Drives the real client through push, pop, lease extend, ack (single and batch,
completed and failed), a consume loop whose handler fails for one message (redelivered
after the queue's retryDelay, then dead-lettered), and transactions (commit and abort).
Every outcome is asserted; the first mismatch exits 1 with a clear message and the
HTTP exchanges seen so far. Exit 0 means the client works against the server.

The client is used through its public API only. Its HTTP goes through a recording
httpx transport (the client's own `transport=` option) that passes every request on
unchanged and keeps a copy, so the script can also check what the client sends (an
extend with no body, `autopilot=true` on pops, `null` for absent ack fields) and that the
server never answered 4xx/5xx: the client swallows some errors (a failed pop returns
`[]`), and the log is what makes such a failure visible.
"""

import asyncio
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import httpx
import queen
from queen import Queen

EXPECTED_CLIENT_VERSION = "2.6.0"
# Whole-run bound; every loop below has its own, smaller one.
RUN_TIMEOUT_S = 60.0
# Queue W (direct push/pop/ack) and C (consume loop): small retry settings so a failed
# message comes back quickly and the dead-letter path is reached after one retry.
W_RETRY_DELAY_MS = 800
C_RETRY_DELAY_MS = 500
RETRY_LIMIT = 1

T0 = time.monotonic()
# Authentication (section 14): the token the client sends and the sub it stands for.
TOKEN = os.environ.get("QUEEN_TOKEN") or None
TOKEN_SUB = os.environ.get("QUEEN_TOKEN_SUB") or None


def auth_headers():
    return {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}


class Mismatch(Exception):
    pass


def log(msg):
    print(f"[{time.monotonic() - T0:6.2f}s] {msg}", flush=True)


def check(cond, what, got=None):
    if not cond:
        raise Mismatch(what if got is None else f"{what}; got: {short(got, 600)}")


def check_eq(got, want, what):
    if got != want:
        raise Mismatch(f"{what}: expected {short(want, 300)}, got {short(got, 600)}")


def short(v, n=200):
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= n else s[: n - 3] + "..."


# --------------------------------------------------------------------------------------
# The recording transport
# --------------------------------------------------------------------------------------


class Exchange:
    def __init__(self, phase, method, target, body, status, resp):
        self.phase = phase
        self.method = method
        self.target = target  # path?query as sent
        self.body = body  # request body bytes
        self.status = status
        self.resp = resp  # response body bytes

    @property
    def path(self):
        return self.target.split("?", 1)[0]

    @property
    def query(self):
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.target).query)

    def json_body(self):
        return json.loads(self.body) if self.body else None

    def json_resp(self):
        return json.loads(self.resp) if self.resp else None

    def line(self):
        body = self.body.decode("utf-8", "replace") if self.body else "<no body>"
        resp = self.resp.decode("utf-8", "replace") if self.resp else "<no body>"
        return (
            f"  [{self.phase}] {self.method} {self.target}\n"
            f"      > {short(body, 400)}\n"
            f"      < {self.status} {short(resp, 400)}"
        )


class Recorder(httpx.AsyncBaseTransport):
    """Passes every request on unchanged and keeps a copy of it and of the answer."""

    def __init__(self):
        self.inner = httpx.AsyncHTTPTransport()
        self.exchanges = []
        self.phase = "setup"

    async def handle_async_request(self, request):
        body = await request.aread()
        response = await self.inner.handle_async_request(request)
        raw = b"".join([chunk async for chunk in response.stream])
        await response.aclose()
        target = request.url.raw_path.decode("ascii")
        self.exchanges.append(
            Exchange(self.phase, request.method, target, body, response.status_code, raw)
        )
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=httpx.ByteStream(raw),
            extensions=response.extensions,
        )

    def since(self, mark):
        return self.exchanges[mark:]

    async def aclose(self):
        await self.inner.aclose()


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def dlq_listing(base, queue_name, group):
    """GET /api/v1/dlq with urllib, independent of the client (DLQ-2)."""
    q = urllib.parse.urlencode({"queue": queue_name, "consumerGroup": group})
    req = urllib.request.Request(f"{base}/api/v1/dlq?{q}", headers=auth_headers())
    with urllib.request.urlopen(req, timeout=10) as r:
        check_eq(r.status, 200, "GET /api/v1/dlq status")
        return json.loads(r.read())


def check_pop_message(m, *, data, tx=None, group, partition):
    """The POP-5 shape of one delivered message, as the client hands it over."""
    for k in ("id", "transactionId", "data", "createdAt", "partitionId", "partition", "leaseId"):
        check(k in m, f"popped message has {k!r}", m)
    check_eq(m["data"], data, "popped message data")
    if tx is not None:
        check_eq(m["transactionId"], tx, "popped message transactionId")
    check_eq(m["partition"], partition, "popped message partition")
    check_eq(m["consumerGroup"], group, "popped message consumerGroup")
    check_eq(m.get("producerSub"), TOKEN_SUB, "popped message producerSub (AUTH-2)")
    check(str(m["createdAt"]).endswith("Z"), "createdAt is UTC with a literal Z (POP-12)", m)


async def pop_until(builder_fn, want, timeout_s, what):
    """Pops (wait=false) until `want` messages arrive or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        msgs = await builder_fn().pop()
        if msgs:
            check_eq(len(msgs), want, f"{what}: number of messages")
            return msgs
        if time.monotonic() > deadline:
            raise Mismatch(f"{what}: nothing delivered within {timeout_s}s")
        await asyncio.sleep(0.1)


# --------------------------------------------------------------------------------------
# The scenario
# --------------------------------------------------------------------------------------


async def scenario(base, rec, client):
    run = uuid.uuid4().hex[:8]
    W = f"pyinterop-{run}.work"
    C = f"pyinterop-{run}.consume"
    X = f"pyinterop-{run}.txnin"
    Y = f"pyinterop-{run}.txnout"

    # ---- configure ----------------------------------------------------------------
    rec.phase = "configure"
    for name, delay in ((W, W_RETRY_DELAY_MS), (C, C_RETRY_DELAY_MS)):
        r = await client.queue(name).config(
            # dead_letter_queue and ttl are keys the protocol does not act on: kept and
            # echoed (CFG-4), as the client reads them back.
            {"lease_time": 30, "retry_limit": RETRY_LIMIT, "retry_delay": delay,
             "dead_letter_queue": True, "ttl": 60}
        ).create()
        check(isinstance(r, dict) and r.get("configured") is True, f"configure {name}", r)
        check_eq(r["options"]["retryDelay"], delay, f"{name} retryDelay")
        check_eq(r["options"]["retryLimit"], RETRY_LIMIT, f"{name} retryLimit")
        check_eq(r["options"]["leaseTime"], 30, f"{name} leaseTime")
        check_eq(r["options"].get("deadLetterQueue"), True, f"{name} deadLetterQueue echoed")
        check_eq(r["options"].get("ttl"), 60, f"{name} ttl echoed")
    log(f"configured {W} and {C}: retryLimit {RETRY_LIMIT}, retryDelay {W_RETRY_DELAY_MS}/{C_RETRY_DELAY_MS} ms")

    # ---- push -----------------------------------------------------------------------
    rec.phase = "push"
    res = await client.queue(W).partition("p-a").push(
        [{"data": {"n": 1}, "transactionId": "tx-a1"}, {"data": {"n": 2}}]
    )
    check(isinstance(res, list) and len(res) == 2, "push answers one item per message (PUSH-1)", res)
    check_eq([x["status"] for x in res], ["queued", "queued"], "push statuses")
    check_eq(res[0]["transaction_id"], "tx-a1", "client-given transactionId is kept")
    check(res[1]["transaction_id"] not in ("", None), "second item has a transactionId", res)
    a1_id = res[0]["message_id"]
    res3 = await client.queue(W).partition("p-a").push({"data": {"n": 3}})
    check_eq([x["status"] for x in res3], ["queued"], "push of a3")
    dup = await client.queue(W).partition("p-a").push({"data": {"n": 99}, "transactionId": "tx-a1"})
    check_eq(dup[0]["status"], "duplicate", "same transactionId, same partition (PUSH-5)")
    check_eq(dup[0]["message_id"], a1_id, "duplicate carries the original message_id (PUSH-5)")
    trace = str(uuid.uuid4())
    other = await client.queue(W).partition("p-b").push({"data": {"n": 10}, "transactionId": "tx-a1", "traceId": trace})
    check_eq(other[0]["status"], "queued", "same transactionId in another partition (PUSH-5)")
    log("push: p-a <- a1 (tx-a1), a2, a3; duplicate tx-a1 refused; p-b <- tx-a1 (with traceId) queued")

    # ---- pop, extend, ack -------------------------------------------------------------
    rec.phase = "pop+ack"
    g1 = lambda: client.queue(W).partition("p-a").group("g1").batch(10).wait(False)  # noqa: E731
    msgs = await g1().pop()
    check_eq(len(msgs), 3, "pop of p-a for g1: number of messages")
    for m, n in zip(msgs, (1, 2, 3)):
        check_pop_message(m, data={"n": n}, group="g1", partition="p-a")
    check_eq(msgs[0]["transactionId"], "tx-a1", "first message's transactionId")
    lease1 = msgs[0]["leaseId"]
    check(lease1 and all(m["leaseId"] == lease1 for m in msgs), "one lease for the pop (POP-1)", msgs)
    log(f"pop p-a g1: 3 messages in order, lease {lease1[:8]}")

    ext = await client.renew(msgs[0])
    check(ext.get("success") is True, "lease extend succeeds (LEASE-1)", ext)
    check_eq(ext.get("renewed"), 1, "lease extend renewed count")
    check(ext.get("newExpiresAt"), "lease extend reports the new expiry", ext)
    log(f"renew lease: success, expires {ext['newExpiresAt']}")

    r = await client.ack(msgs[0], True, {"group": "g1"})
    check(r.get("success") is True, "ack a1 completed", r)
    check(r.get("leaseReleased") is False, "partial ack keeps the lease (ACK step 5)", r)
    # Taken before the failed ack is sent, so it is no later than the broker's "now"
    # for it: retryDelay counts from there.
    failed_at = time.monotonic()
    r = await client.ack(msgs[1], False, {"group": "g1", "error": "boom"})
    check(r.get("success") is True, "ack a2 failed", r)
    check(r.get("leaseReleased") is True, "a failed ack releases the lease (ACK-6)", r)
    log("ack a1 completed, a2 failed (lease released, a2 and a3 come back)")

    ext2 = await client.renew(lease1)
    check(ext2.get("success") is False, "a released lease is not revived (LEASE-1)", ext2)
    early = await g1().pop()
    if time.monotonic() - failed_at < W_RETRY_DELAY_MS / 1000.0:
        check_eq(early, [], "nothing comes back before retryDelay (ACK-6)")
    again = await pop_until(g1, 2, 5.0, "redelivery of a2, a3 after retryDelay")
    check(time.monotonic() - failed_at >= W_RETRY_DELAY_MS / 1000.0 * 0.95, "redelivered after retryDelay")
    check_eq([m["id"] for m in again], [msgs[1]["id"], msgs[2]["id"]], "a2 and a3 redelivered, same ids")
    check(again[0]["leaseId"] not in ("", lease1), "redelivery under a new lease", again)
    log(f"renew of released lease: refused; redelivered a2, a3 after {time.monotonic() - failed_at:.2f}s")

    r = await client.ack(again, True, {"group": "g1"})
    check(r.get("success") is True, "batch ack a2, a3 completed", r)
    check_eq([x.get("success") for x in r.get("results", [])], [True, True], "batch ack item results")
    check_eq(await g1().pop(), [], "p-a drained for g1")
    log("batch ack a2, a3: both success; p-a empty for g1")

    # Another group reads the same partition from the start; commit at delivery (POP-7).
    g2 = await client.queue(W).partition("p-a").group("g2").batch(10).wait(False).commit_on_delivery().pop()
    check_eq([m["data"]["n"] for m in g2], [1, 2, 3], "group g2 sees every message (PROTO-GROUP)")
    check(all(m["leaseId"] == "" for m in g2), "autoAck pop has no lease (POP-7)", g2)
    check_eq(await client.queue(W).partition("p-a").group("g2").wait(False).pop(), [], "g2 committed at delivery")
    log("pop p-a g2 with commit_on_delivery: 3 messages, no lease; then empty")

    # A new group that subscribes from "new" skips the backlog (POP-13).
    late = lambda: client.queue(W).partition("p-a").group("late").subscription_mode("new").wait(False)  # noqa: E731
    check_eq(await late().pop(), [], "subscriptionMode=new skips the existing backlog (POP-13)")
    await client.queue(W).partition("p-a").push({"data": {"n": 4}, "transactionId": "tx-a4"})
    a4 = await late().pop()
    check_eq([(m["transactionId"], m["data"]) for m in a4], [("tx-a4", {"n": 4})], "group 'late' gets only the new message")
    r = await client.ack(a4[0], "completed", {"group": "late"})
    check(r.get("success") is True, "ack a4 for 'late'", r)
    log("group 'late' with subscriptionMode=new: backlog skipped, then only a4")

    # Queue mode (no group): the ack carries consumerGroup null.
    qm = lambda: client.queue(W).partition("p-b").wait(False)  # noqa: E731
    b = await qm().pop()
    check_eq(len(b), 1, "queue-mode pop of p-b")
    check_pop_message(b[0], data={"n": 10}, tx="tx-a1", group="__QUEUE_MODE__", partition="p-b")
    # PUSH-9 [OPEN]: a plain push's traceId is kept or dropped (our server drops it, as
    # the seed describes); a transaction's push keeps it (checked below).
    check(b[0]["traceId"] in (None, trace), "traceId of a plain push is null or the one given (PUSH-9)", b[0])
    r = await client.ack(b[0])
    check(r.get("success") is True, "queue-mode ack", r)
    t = time.monotonic()
    empty = await client.queue(W).partition("p-b").wait(True).timeout_millis(300).pop()
    check_eq(empty, [], "long poll on a drained partition")
    check(time.monotonic() - t >= 0.25, "long poll waited for its timeout (POP-11)")
    log("queue-mode pop/ack of p-b; long poll (300 ms) on empty partition returned nothing")

    # ---- consume loop with a failing handler ------------------------------------------
    rec.phase = "consume"
    pushed = await client.queue(C).push(
        [{"data": {"n": 1}}, {"data": {"n": 2, "poison": True}}, {"data": {"n": 3}}]
    )
    check_eq([x["status"] for x in pushed], ["queued"] * 3, "push to the consume queue")
    txs = [x["transaction_id"] for x in pushed]
    deliveries = []
    stop = asyncio.Event()

    async def handler(m):
        deliveries.append((time.monotonic(), m["transactionId"], m["id"], m["data"]))
        if m["data"]["n"] == 1:
            await asyncio.sleep(0.45)  # long enough for the client's lease renewal to run
        if m["data"].get("poison"):
            raise RuntimeError(f"poison message n={m['data']['n']}")
        if m["data"]["n"] == 3:
            stop.set()

    mark = len(rec.exchanges)
    consume = client.queue(C).group("cg").batch(1).wait(True).timeout_millis(1000).renew_lease(True, 200).consume(handler, signal=stop)
    try:
        await asyncio.wait_for(consume, timeout=15)
    except asyncio.TimeoutError:
        raise Mismatch(
            "consume loop did not finish within 15s; deliveries: "
            + short([(tx, d) for _, tx, _, d in deliveries], 600)
        )
    order = [d["n"] for _, _, _, d in deliveries]
    check_eq(order, [1, 2, 2, 3], "consume deliveries (n of each handler call)")
    check_eq([tx for _, tx, _, _ in deliveries], [txs[0], txs[1], txs[1], txs[2]], "consume transactionIds")
    check_eq(deliveries[1][2], deliveries[2][2], "the redelivery is the same message id")
    gap = deliveries[2][0] - deliveries[1][0]
    check(gap >= C_RETRY_DELAY_MS / 1000.0 * 0.95, f"redelivery waited retryDelay {C_RETRY_DELAY_MS} ms (ACK-6)", gap)
    acks = [e for e in rec.since(mark) if e.path.startswith("/api/v1/ack")]
    statuses = [(e.json_body().get("status"), e.json_body().get("error")) for e in acks]
    check_eq(
        statuses,
        [("completed", None), ("failed", "poison message n=2"), ("failed", "poison message n=2"), ("completed", None)],
        "acks the consume loop sent (status, error)",
    )
    for e in acks:
        items = e.json_resp()
        check(isinstance(items, list) and all(i.get("success") for i in items), "consume ack accepted", e.line())
    renewals = [e for e in rec.since(mark) if e.path.endswith("/extend")]
    check(
        any(e.status == 200 and e.json_resp().get("success") is True for e in renewals),
        "the consume loop's background lease renewal succeeded at least once",
        [e.line() for e in renewals],
    )
    dead = [i for e in acks for i in e.json_resp() if i.get("dlq")]
    check_eq(len(dead), 1, "exactly one ack filed a dead letter")
    log(
        f"consume: deliveries n={order}, {len(renewals)} lease renewal(s) during the slow handler, "
        f"redelivery after {gap:.2f}s, second failure dead-lettered"
    )

    listing = dlq_listing(base, C, "cg")
    check_eq(listing.get("total"), 1, "DLQ total for the consume queue")
    dl = listing["messages"][0]
    check_eq(dl["transactionId"], txs[1], "dead letter transactionId")
    check_eq(dl["id"], deliveries[1][2], "dead letter message id")
    check_eq(dl["consumerGroup"], "cg", "dead letter consumerGroup")
    check_eq(dl["queue"], C, "dead letter queue")
    check_eq(dl["errorMessage"], "poison message n=2", "dead letter errorMessage (ACK-6)")
    check_eq(dl["retryCount"], RETRY_LIMIT, "dead letter retryCount")
    check_eq(dl["data"], {"n": 2, "poison": True}, "dead letter data")
    via_client = await client.queue(C).dlq("cg").get()
    check_eq(via_client.get("total"), 1, "DLQ total through the client's dlq() builder")
    check_eq(await client.queue(C).group("cg").wait(False).pop(), [], "consume queue drained for cg")
    log("DLQ (urllib and client): one dead letter, errorMessage and retryCount as expected")

    # ---- transactions -------------------------------------------------------------------
    rec.phase = "transaction"
    await client.queue(X).push({"data": {"job": 1}, "transactionId": "x1"})
    xm = await client.queue(X).group("tg").wait(False).pop()
    check_eq(len(xm), 1, "pop of the transaction input")
    ytrace = str(uuid.uuid4())
    res = await (
        client.transaction()
        .ack(xm[0], "completed", {"consumer_group": "tg"})
        .queue(Y)
        .partition("out")
        .push([{"data": {"result": 1}, "transactionId": "y1", "traceId": ytrace}])
        .commit()
    )
    check(res.get("success") is True, "transaction ack + push commits (TXN-1)", dict(res))
    check_eq(len(res.get("results", [])), 2, "one transaction result per push item and ack (TXN-3)")
    check_eq(await client.queue(X).group("tg").wait(False).pop(), [], "input acked by the transaction")
    ym = await client.queue(Y).partition("out").wait(False).pop()
    check_eq([(m["transactionId"], m["data"]) for m in ym], [("y1", {"result": 1})], "output pushed by the transaction")
    check_eq(ym[0]["traceId"], ytrace, "a transaction's push keeps its traceId (seed pop-routes.md)")
    r = await client.ack(ym[0])
    check(r.get("success") is True, "ack of the transaction's output", r)
    log("transaction: ack of x1 + push of y1 committed together")

    aborted = None
    try:
        await (
            client.transaction()
            .queue(Y)
            .partition("out")
            .push([{"data": {"result": 2}, "transactionId": "y2"}])
            .ack({"transactionId": "no-such-message", "partitionId": xm[0]["partitionId"]}, "completed", {"consumer_group": "tg"})
            .commit()
        )
    except Exception as e:  # the client raises on success:false
        aborted = str(e)
    check(aborted is not None, "a transaction with an unresolvable ack must fail (TXN-2)")
    check_eq(await client.queue(Y).partition("out").wait(False).pop(), [], "aborted transaction pushed nothing (TXN-1)")
    again = await client.queue(Y).partition("out").push({"data": {"result": 2}, "transactionId": "y2"})
    check_eq(again[0]["status"], "queued", "y2 was never written by the aborted transaction")
    log(f"transaction with an unresolvable ack aborted ({short(aborted, 80)}); its push was not written")

    # ---- discovery pop (namespace) -------------------------------------------------------
    rec.phase = "discovery"
    ns = f"pyinterop-{run}-disc"
    D = f"{ns}.jobs"
    await client.queue(D).push([{"data": {"d": 1}}, {"data": {"d": 2}}])
    dm = await client.queue().namespace(ns).group("dg").batch(10).wait(False).pop()
    check_eq([m["data"] for m in dm], [{"d": 1}, {"d": 2}], "discovery pop by namespace (section 3)")
    check(all(m["consumerGroup"] == "dg" and m["partition"] == "Default" for m in dm), "discovery messages", dm)
    r = await client.ack(dm, True, {"group": "dg"})
    check(r.get("success") is True, "batch ack of the discovered messages", r)
    check_eq(await client.queue().namespace(ns).group("dg").wait(False).pop(), [], "namespace drained for dg")
    log(f"discovery pop by namespace {ns}: 2 messages, acked")

    # ---- management and observability (section 17) ---------------------------------------
    rec.phase = "management"
    admin = client.admin
    ov = await admin.get_overview()
    check(isinstance(ov, dict) and ov.get("queues", 0) >= 5 and ov.get("messages", 0) >= 3, "get_overview counts the run's queues (MGMT-4)", ov)
    run_ns = f"pyinterop-{run}"
    qs = await admin.list_queues(namespace=run_ns, limit=10)
    check_eq(sorted(q["name"] for q in qs["queues"]), sorted([W, C, X, Y]), "list_queues of the run's namespace (MGMT-4)")
    check_eq((qs["total"], qs["limit"], qs["offset"]), (4, 10, 0), "list_queues is a page (MGMT-2)")
    q = await admin.get_queue(C)
    check(q.get("name") == C and q["options"]["retryDelay"] == C_RETRY_DELAY_MS and q["messages"] == 3, "get_queue with its figures and options (MGMT-4)", q)
    depth = await admin.get_queue_depth(C, group="cg")
    check_eq((depth["queue"], depth["group"], depth["pending"], depth["conflation"]), (C, "cg", 0, False), "get_queue_depth: cg has read everything (MGMT-4)")
    parts = await admin.get_partitions(queue=C)
    check_eq([(p["name"], p["messages"], p["lastOffset"]) for p in parts["partitions"]], [("Default", 3, 3)], "get_partitions (MGMT-4)")
    names = [n["namespace"] for n in (await admin.get_namespaces())["namespaces"]]
    check(run_ns in names, "get_namespaces lists the run's namespace (MGMT-4)", names)
    tasks = [t["task"] for t in (await admin.get_tasks())["tasks"]]
    check("consume" in tasks, "get_tasks lists the consume task (MGMT-4)", tasks)
    st = await admin.get_status()
    check(st.get("pushMaintenance") is False and st.get("queues", 0) >= 5, "get_status (MGMT-5)", st)
    stats = await admin.get_queue_stats(namespace=run_ns)
    check_eq(len(stats["queues"]), 4, "get_queue_stats of the run's namespace (MGMT-5)")
    detail = await admin.get_queue_detail(C)
    check(detail["queue"]["name"] == C and len(detail["partitions"]) == 1, "get_queue_detail (MGMT-5)", detail)
    an = await admin.get_analytics(queue=C, interval="minute", **{"from": "2000-01-01T00:00:00Z", "to": "2000-01-01T01:00:00Z"})
    check(len(an["buckets"]) == 60 and an["totals"]["ingested"] == 0, "get_analytics of an hour long ago: 60 empty minutes (MGMT-13)", an)
    an = await admin.get_analytics(queue=C)
    check_eq((an["interval"], an["totals"]["ingested"], an["totals"]["deadLettered"]), ("hour", 3, 1), "get_analytics of the last day: C's messages and dead letter (MGMT-13)")
    log(f"get_analytics of the last day by the hour: {len(an['buckets'])} buckets, totals {an['totals']}")
    groups = await admin.list_consumer_groups()
    check("cg" in [g["name"] for g in groups["consumerGroups"]], "list_consumer_groups lists cg (MGMT-3)", groups)
    cg = await admin.get_consumer_group("cg")
    check_eq([(x["queue"], x["lag"], x["state"]) for x in cg["queues"]], [(C, 0, "caughtUp")], "get_consumer_group (MGMT-3)")
    lagging = await admin.get_lagging_consumers(3600)
    check("cg" not in [g["name"] for g in lagging["consumerGroups"]], "get_lagging_consumers: cg does not lag (MGMT-3)", lagging)
    peek = await admin.list_messages(queue=C, consumerGroup="cg")
    check_eq([m["status"] for m in peek["messages"]], ["completed", "deadLettered", "completed"], "list_messages: each message's state for cg (MGMT-6)")
    check_eq([m["transactionId"] for m in peek["messages"]], txs, "list_messages in offset order")
    poison = peek["messages"][1]
    one = await admin.get_message(poison["partitionId"], poison["transactionId"])
    check_eq(
        [(g["group"], g["status"], g["retryCount"], g["errorMessage"]) for g in one["groups"]],
        [("cg", "deadLettered", RETRY_LIMIT, "poison message n=2")],
        "get_message: the attempt count and last error (MGMT-7)",
    )
    sk = await admin.seek_consumer_group("late2", C, {"toEnd": True})
    check(sk.get("success") is True and sk.get("partitions") == 1, "seek_consumer_group to the end (MGMT-8)", sk)
    check_eq(await client.queue(C).group("late2").wait(False).pop(), [], "after the seek, nothing to deliver")
    gone = await admin.delete_consumer_group_for_queue("late2", C)
    check(gone.get("success") is True and gone.get("deleted") == 1, "delete_consumer_group_for_queue (MGMT-9)", gone)
    again = await client.queue(C).group("late2").batch(10).wait(False).pop()
    check_eq(len(again), 3, "a deleted group starts again from the oldest message")
    r = await client.delete_consumer_group("late2")
    check(r.get("success") is True, "delete_consumer_group (MGMT-9)", r)
    ts = await client.update_consumer_group_timestamp("cg", "2000-01-01T00:00:00.000Z")
    check(ts.get("success") is True and ts.get("queues") == 1, "update_consumer_group_timestamp (MGMT-8)", ts)
    back = await client.queue(C).group("cg").batch(10).wait(False).pop()
    check_eq([m["transactionId"] for m in back], txs, "after the subscription time cg reads the queue again")
    r = await client.ack(back, True, {"group": "cg"})
    check(r.get("success") is True, "ack of what the seek back delivered", r)
    redo = await admin.retry_message(poison["partitionId"], poison["transactionId"])
    check(redo.get("success") is True and redo.get("retried") == 1, "retry_message of the dead letter (MGMT-12)", redo)
    again = await client.queue(C).group("cg").wait(False).pop()
    check_eq([(m["transactionId"], m["data"]) for m in again], [(redo["transactionId"], {"n": 2, "poison": True})], "the retried message comes back to cg")
    await client.ack(again, True, {"group": "cg"})
    gone = await admin.delete_message(poison["partitionId"], poison["transactionId"])
    check(gone.get("success") is True and gone.get("transactionId") == poison["transactionId"], "delete_message (MGMT-11)", gone)
    # Read past the client, whose log must hold no 4xx: the view of a deleted message is 404.
    req = urllib.request.Request(
        f"{base}/api/v1/messages/{poison['partitionId']}/{poison['transactionId']}", headers=auth_headers()
    )
    try:
        urllib.request.urlopen(req, timeout=10)
        raise Mismatch("a deleted message is still shown (MGMT-11)")
    except urllib.error.HTTPError as e:
        check_eq(e.code, 404, "the view of a deleted message (MGMT-11)")
    fresh = await client.queue(C).group("after-delete").batch(10).wait(False).pop()
    check(poison["transactionId"] not in [m["transactionId"] for m in fresh], "a deleted message is never delivered (MGMT-11)", fresh)
    m = await admin.metrics()
    check(isinstance(m, dict) and m.get("uptimeSeconds", -1) >= 0 and m.get("pushes", 0) >= 1, "metrics is JSON (MGMT-10)", m)
    h = await admin.health()
    check(h.get("status") == "healthy" and isinstance(h.get("version"), str), "health with its version (HEALTH-4)", h)
    log("management: overview, queues, depth, partitions, namespaces, tasks, status, groups, lagging, peek, one message, seek, group delete, message delete, metrics, health")

    # ---- queue delete -----------------------------------------------------------------------
    rec.phase = "delete"
    for name in (W, C, X, Y, D):
        r = await client.queue(name).delete()
        check(isinstance(r, dict) and r.get("deleted") is True and r.get("existed") is True, f"delete {name} (DEL-1)", r)
    check_eq(dlq_listing(base, C, "cg").get("total"), 0, "dead letters go with their queue (DEL-1)")
    log("deleted the five queues; their dead letters are gone")

    # ---- authentication ---------------------------------------------------------------
    if TOKEN:
        rec.phase = "auth"
        body = json.dumps({"items": [{"queue": W, "payload": 1}]}).encode()
        req = urllib.request.Request(
            f"{base}/api/v1/push", data=body, headers={"content-type": "application/json"}
        )
        try:
            urllib.request.urlopen(req, timeout=10)
            raise Mismatch("a push without a token was accepted (AUTH-4)")
        except urllib.error.HTTPError as e:
            check_eq(e.code, 401, "a push without a token (AUTH-4)")
            check_eq(json.loads(e.read()), {"error": "Authentication required"}, "its body")
        log(f"authentication: every call carried the token of {TOKEN_SUB!r}; without it, 401")

    # ---- what the client sent -----------------------------------------------------------
    rec.phase = "wire"
    ex = rec.exchanges
    bad = [e for e in ex if e.status >= 400]
    check(not bad, "no request answered 4xx/5xx", "\n".join(e.line() for e in bad))
    extends = [e for e in ex if e.path.endswith("/extend")]
    check(extends and all(e.body == b"" for e in extends), "the client extends a lease with no body", [e.line() for e in extends])
    pops = [e for e in ex if e.path.startswith("/api/v1/pop")]
    check(pops and all(e.query.get("autopilot") == ["true"] for e in pops), "every pop carries autopilot=true", [e.target for e in pops])
    singles = [e.json_body() for e in ex if e.path == "/api/v1/ack"]
    check(any(b.get("error", 0) is None for b in singles), "single acks send error: null", singles)
    check(any("consumerGroup" in b and b["consumerGroup"] is None for b in singles), "queue-mode ack sends consumerGroup: null", singles)
    batches = [e.json_body() for e in ex if e.path == "/api/v1/ack/batch"]
    check(batches and all("error" in a and a["error"] is None for b in batches for a in b["acknowledgments"]), "batch ack items send error: null", batches)
    txns = [e.json_body() for e in ex if e.path == "/api/v1/transaction"]
    check(txns and all("requiredLeases" in t for t in txns), "transactions send requiredLeases", txns)
    log(
        f"wire: {len(ex)} requests, none refused; extend with empty body, autopilot=true on "
        f"{len(pops)} pops, null ack fields, requiredLeases in transactions"
    )


async def main(base):
    check_eq(queen.__version__, EXPECTED_CLIENT_VERSION, "installed queen-mq version")
    log(f"queen-mq {queen.__version__} (httpx {httpx.__version__}) against {base}")
    rec = Recorder()
    client = Queen(base, transport=rec, retry_attempts=1, timeout_millis=10000, bearer_token=TOKEN)
    try:
        await scenario(base, rec, client)
    except BaseException:
        print("\nHTTP exchanges so far (oldest first):", file=sys.stderr)
        for e in rec.exchanges:
            print(e.line(), file=sys.stderr)
        raise
    finally:
        await client.close()
    if os.environ.get("QUEEN_INTEROP_WIRE") == "1":
        print("\nHTTP exchanges (QUEEN_INTEROP_WIRE=1):")
        for e in rec.exchanges:
            print(e.line())


if __name__ == "__main__":
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("QUEEN_URL")
    if not url:
        print("usage: interop.py URL (or set QUEEN_URL)", file=sys.stderr)
        sys.exit(2)
    url = url.rstrip("/")
    try:
        asyncio.run(asyncio.wait_for(main(url), RUN_TIMEOUT_S))
    except Mismatch as e:
        print(f"\nINTEROP FAILURE: {e}", file=sys.stderr)
        sys.exit(1)
    except asyncio.TimeoutError:
        print(f"\nINTEROP FAILURE: the run did not finish within {RUN_TIMEOUT_S}s", file=sys.stderr)
        sys.exit(1)
    log("all interop checks passed")
