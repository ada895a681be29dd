-- Every pop, as one round trip: the maintenance switch, "now", the queue (or the queues
-- of a discovery pop), whether the group is subscribed there, and `ready` (nothing to
-- set up first); then, when ready, the walk that claims.
--
-- POP-4 (our choice): the walk takes a queue's partitions in name order, starting after
-- `p_after_name` (the last partition this broker claimed for the group there, a hint
-- the server keeps; '' before every name) and wrapping around to the first: round
-- robin, through the (queue_id, name) key. Each
-- open candidate is claimed under its pair's lock, tried without waiting (POP-2), until
-- the batch is spent or `p_cap` partitions are claimed, so a pop reads the partitions
-- it passes over, not the whole queue. A discovery pop walks its queues the same way,
-- by queue id after `p_after_queue`, each queue's partitions from its first. All claims of
-- one pop commit together, with the statement.
--
-- It is a function, not one statement, because each small statement here keeps its own
-- cached plan; one large statement was re-planned whenever the tables' statistics
-- changed, and that cost landed on woken pops (docs/decisions/0003-sql-functions.md).
--
-- Rows, read by column name (`server/src/pg/pop.rs`): one per claimed message (`m_*`
-- set), partition by partition in claim order and each in offset order; one per
-- candidate passed over because its lock was held (`skipped`), for the server's second
-- pass; and, when there is neither, one row with NULL candidate columns.
CREATE OR REPLACE FUNCTION queen_pop_head(
    p_queue text,       -- the queue's name, or NULL for a discovery pop
    p_namespace text,   -- a discovery pop's namespace, or NULL
    p_task text,        -- a discovery pop's task, or NULL
    p_group text,       -- the consumer group
    p_only text,        -- only this partition (the partition route), or NULL
    p_queue_mode text,  -- the queue-mode group's name: it needs no subscription
    p_batch bigint,     -- the most messages to claim
    p_cap bigint,       -- the most partitions to claim
    p_lease uuid,       -- the lease id, or NULL for autoAck
    p_lease_secs bigint,-- the pop's leaseSeconds, or NULL for the queue's leaseTime
    p_after_name text,  -- a queue pop's walk starts after this partition name
    p_after_queue bigint -- a discovery pop's walk starts after this queue id
) RETURNS TABLE (
    paused boolean, now timestamptz, queue_id bigint, subscribed boolean, ready boolean,
    id uuid, name text, options jsonb, skipped boolean,
    m_offset bigint, m_id uuid, m_transaction_id text, m_trace_id uuid, m_data json,
    m_created_at timestamptz, m_producer_sub text, m_sealed boolean
) LANGUAGE plpgsql VOLATILE
-- Every statement here finds its rows by key, and the server plans generically: a
-- generic plan guesses a queue's partition count from the table's average, and with one
-- queue of many partitions beside a small one it scanned every partition for the small
-- one, and a walk sorted its candidates instead of reading them in key order and
-- stopping early. These settings leave the planner the ordered index paths only.
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET enable_bitmapscan = off SET enable_sort = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_paused boolean;
    v_now timestamptz := now();
    v_qid bigint;
    v_options jsonb;
    v_subscribed boolean := false;
    v_ready boolean;
    v_budget bigint := p_batch;
    v_taken bigint := 0;
    v_rows bigint := 0;
    v_n bigint;
    v_lap int;
    v_q record;
    v_cand record;
BEGIN
    SELECT s.pop_maintenance INTO v_paused FROM queen_switch_state s;
    IF p_queue IS NOT NULL THEN
        SELECT q.id, q.options INTO v_qid, v_options FROM queen_queues q WHERE q.name = p_queue;
        IF v_qid IS NOT NULL THEN
            v_subscribed := EXISTS (SELECT 1 FROM queen_subscriptions s
                                    WHERE s.queue_id = v_qid AND s.consumer_group = p_group);
        END IF;
        v_ready := v_qid IS NOT NULL AND (p_group = p_queue_mode OR v_subscribed);
    ELSE
        -- Discovery: ready when every queue in scope is subscribed (POP-13).
        v_ready := p_group = p_queue_mode OR NOT EXISTS (
            SELECT 1 FROM queen_queues q
            WHERE (p_namespace IS NULL OR q.namespace = p_namespace)
              AND (p_task IS NULL OR q.task = p_task)
              AND NOT EXISTS (SELECT 1 FROM queen_subscriptions s
                              WHERE s.queue_id = q.id AND s.consumer_group = p_group));
    END IF;

    IF v_ready AND NOT v_paused THEN
        -- Two laps: after the hint to the end, then from the start up to it.
        FOR v_lap IN 0..1 LOOP
            FOR v_q IN
                SELECT v_qid AS id, v_options AS options WHERE p_queue IS NOT NULL
                UNION ALL
                (SELECT q.id, q.options FROM queen_queues q
                 WHERE p_queue IS NULL
                   AND (p_namespace IS NULL OR q.namespace = p_namespace)
                   AND (p_task IS NULL OR q.task = p_task)
                   AND ((v_lap = 0 AND q.id > p_after_queue) OR (v_lap = 1 AND q.id <= p_after_queue))
                 ORDER BY q.id)
            LOOP
                -- A queue pop's laps split its partitions at the hint; a discovery pop
                -- walks each queue whole.
                FOR v_cand IN
                    SELECT c.* FROM queen_pop_candidates(v_q.id, p_group, p_only, v_now, v_q.options) c
                    WHERE c.window_open AND p_queue IS NULL
                    UNION ALL
                    (SELECT c.* FROM queen_pop_candidates(v_q.id, p_group, p_only, v_now, v_q.options) c
                     WHERE c.window_open AND p_queue IS NOT NULL AND v_lap = 0 AND c.name > p_after_name
                     ORDER BY c.name)
                    UNION ALL
                    (SELECT c.* FROM queen_pop_candidates(v_q.id, p_group, p_only, v_now, v_q.options) c
                     WHERE c.window_open AND p_queue IS NOT NULL AND v_lap = 1 AND c.name <= p_after_name
                     ORDER BY c.name)
                LOOP
                    IF pg_try_advisory_xact_lock(queen_pair_key(v_cand.id, p_group)) THEN
                        -- A claimed row needs no options: the claim is done.
                        RETURN QUERY SELECT v_paused, v_now, v_q.id, v_subscribed, v_ready,
                            v_cand.id, v_cand.name, NULL::jsonb, false,
                            m."offset", m.id, m.transaction_id, m.trace_id, m.data, m.created_at,
                            m.producer_sub, m.sealed
                        FROM queen_claim(v_cand.id, p_group, v_q.options, v_now, v_budget,
                                         p_lease, p_lease_secs) AS m;
                        GET DIAGNOSTICS v_n = ROW_COUNT;
                        IF v_n > 0 THEN
                            v_budget := v_budget - v_n;
                            v_taken := v_taken + 1;
                            v_rows := v_rows + v_n;
                        END IF;
                    ELSE
                        -- POP-2: held by another pop or an ack right now; the server
                        -- asks again, waiting, if this pop claims nothing else.
                        RETURN QUERY SELECT v_paused, v_now, v_q.id, v_subscribed, v_ready,
                            v_cand.id, v_cand.name, v_cand.options, true,
                            NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::json,
                            NULL::timestamptz, NULL::text, NULL::boolean;
                        v_rows := v_rows + 1;
                    END IF;
                    EXIT WHEN v_budget <= 0 OR v_taken >= p_cap;
                END LOOP;
                EXIT WHEN v_budget <= 0 OR v_taken >= p_cap;
            END LOOP;
            EXIT WHEN v_budget <= 0 OR v_taken >= p_cap;
        END LOOP;
    END IF;

    IF v_rows = 0 THEN
        RETURN QUERY SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
            NULL::uuid, NULL::text, NULL::jsonb, NULL::boolean,
            NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::json, NULL::timestamptz,
            NULL::text, NULL::boolean;
    END IF;
END
$fn$;
