-- The write of a push whose every transactionId the broker minted (PUSH-4), as a
-- function: lock the partitions, number and insert the messages and bump the partitions'
-- last offsets, in one round trip and one transaction
-- (`server/src/pg/minted.rs` says why this path exists).
--
-- A function and not one statement for the same reason as `queen_pop_head`: small
-- statements keep cheap cached plans (docs/decisions/0003-sql-functions.md).
--
-- Arguments (the caller builds them): the distinct (queue, partition) keys `p_qn`/`p_pn`
-- in canonical order with each key's item count `p_cnt`; per item, its key's position
-- `p_ki` (from 0), its rank among its key's items `p_rank` (from 1), its id, transactionId,
-- traceId, data and producerSub (AUTH-2). Other processes are told of the push after it
-- commits (`server/src/pg/notify.rs`).
-- Returns `go` (written) and `maintenance` (push maintenance is on: nothing written). Both
-- false: a queue or partition is missing, a queue keeps its payloads sealed (ENC-2,
-- which only the server can do) or has a maxSize (RET-5, counted on the general path),
-- and nothing was written; the caller takes the general path.
CREATE OR REPLACE FUNCTION queen_push_minted(
    p_qn text[], p_pn text[], p_cnt bigint[],
    p_ki int[], p_rank bigint[], p_id uuid[], p_txn text[], p_trace uuid[], p_data text[],
    p_sub text[]
) RETURNS TABLE (go boolean, maintenance boolean)
LANGUAGE plpgsql VOLATILE
-- A statement's plan is made once per connection, maybe while the tables are still
-- small, and kept until their statistics change: index paths only, as in the pop head,
-- so that no plan made for a small table scans a large one.
SET enable_seqscan = off SET enable_bitmapscan = off
AS $fn$
DECLARE
    v_ids uuid[];
    v_last bigint[];
    v_general boolean;
BEGIN
    IF (SELECT s.push_maintenance FROM queen_switch_state s) THEN
        RETURN QUERY SELECT false, true;
        RETURN;
    END IF;
    -- Lock the partitions in canonical order (queue id, partition name), as the general
    -- path does, so the two never wait on each other in a cycle; the lock returns the
    -- newest committed last_offset after any wait. Indexed by key position + 1. The keys
    -- are resolved to queue ids first (materialized) so each partition is found by its
    -- whole key (`queues.rs` says why), and FOR NO KEY UPDATE does not wait for cursor
    -- inserts under the partitions.
    WITH k AS MATERIALIZED (
        SELECT q.id AS qid, k.pn, k.n,
               coalesce((q.options->>'encryptionEnabled')::boolean, false)
               OR coalesce((q.options->>'maxSize')::bigint, 0) > 0 AS general
        FROM unnest(p_qn, p_pn) WITH ORDINALITY AS k(qn, pn, n)
        JOIN queen_queues q ON q.name = k.qn)
    SELECT array_agg(lk.id ORDER BY lk.n), array_agg(lk.last_offset ORDER BY lk.n),
           bool_or(lk.general)
    INTO v_ids, v_last, v_general
    FROM (SELECT p.id, p.last_offset, k.n, k.general
          FROM k JOIN queen_partitions p ON p.queue_id = k.qid AND p.name = k.pn
          ORDER BY p.queue_id, p.name FOR NO KEY UPDATE OF p) lk;
    IF coalesce(cardinality(v_ids), 0) <> cardinality(p_qn) OR v_general THEN
        RETURN QUERY SELECT false, false;
        RETURN;
    END IF;
    -- PUSH-6: offsets follow on from the locked last offset, in request order.
    INSERT INTO queen_messages (partition_id, "offset", id, transaction_id, trace_id, data,
                                producer_sub, created_at)
    SELECT v_ids[x.ki + 1], v_last[x.ki + 1] + x.r, x.i, x.t, x.tr, x.d::json, x.s, now()
    FROM unnest(p_ki, p_rank, p_id, p_txn, p_trace, p_data, p_sub) AS x(ki, r, i, t, tr, d, s);
    UPDATE queen_partitions p SET last_offset = u.last + u.cnt, last_write_at = now()
    FROM unnest(v_ids, v_last, p_cnt) AS u(id, last, cnt) WHERE p.id = u.id;
    RETURN QUERY SELECT true, false;
END
$fn$;
