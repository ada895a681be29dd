-- The head of every pop, as one round trip: the maintenance switch, "now", the queue,
-- whether the group is subscribed there, and `ready` (nothing to set up first), then the
-- queue's open candidates; and, when exactly one candidate is open, its claim under the
-- pair's lock (POP-2), so that a parked pop woken by a push answers in one round trip.
--
-- It is a function, not one statement, because each small statement here keeps its own
-- cached plan; one large statement was re-planned whenever the tables' statistics
-- changed, and that cost landed on woken pops (docs/decisions/0003-sql-functions.md).
--
-- Rows, read by column name (`server/src/pg/pop.rs`):
-- * a claim was tried (`tried` is the candidate): one row per claimed message
--   (`m_*` columns) in offset order, or one row with NULL `m_*` when the claim got
--   nothing (the lock was held, or the cursor moved, leased or waits out a retryDelay);
-- * no claim was tried (not ready, paused, no open candidate, or several): one row per
--   open candidate, or one row with NULL candidate columns when there is none.
-- A discovery pop passes no queue: it is never `ready` and gets the switch and "now".
CREATE OR REPLACE FUNCTION queen_pop_head(
    p_queue text,       -- the queue's name, or NULL for a discovery pop
    p_group text,       -- the consumer group
    p_only text,        -- only this partition (the partition route), or NULL
    p_queue_mode text,  -- the queue-mode group's name: it needs no subscription
    p_batch bigint,     -- the most messages to claim
    p_lease uuid,       -- the lease id, or NULL for autoAck
    p_lease_secs bigint -- the pop's leaseSeconds, or NULL for the queue's leaseTime
) RETURNS TABLE (
    paused boolean, now timestamptz, queue_id bigint, subscribed boolean, ready boolean,
    id uuid, name text, options jsonb, seq bigint, oldest timestamptz,
    tried uuid,
    m_offset bigint, m_id uuid, m_transaction_id text, m_trace_id uuid, m_data json,
    m_created_at timestamptz, m_producer_sub text, m_sealed boolean
) LANGUAGE plpgsql VOLATILE
-- Every statement here finds its rows by key, and the server plans generically: a
-- generic plan guesses a queue's partition count from the table's average, and with one
-- queue of many partitions beside a small one it scanned every partition for the small
-- one. These settings leave the planner the index paths only.
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $fn$
#variable_conflict use_column
DECLARE
    v_paused boolean;
    v_now timestamptz := now();
    v_qid bigint;
    v_options jsonb;
    v_subscribed boolean := false;
    v_ready boolean;
    v_cand record;
    -- Open candidates read (the pass stops at the second), and the last of them.
    v_open int := 0;
    v_one record;
BEGIN
    SELECT s.enabled INTO v_paused FROM queen_switches s WHERE s.name = 'pop_maintenance';
    SELECT q.id, q.options INTO v_qid, v_options FROM queen_queues q WHERE q.name = p_queue;
    IF v_qid IS NOT NULL THEN
        v_subscribed := EXISTS (SELECT 1 FROM queen_subscriptions s
                                WHERE s.queue_id = v_qid AND s.consumer_group = p_group);
    END IF;
    v_ready := v_qid IS NOT NULL AND (p_group = p_queue_mode OR v_subscribed);

    IF v_ready AND NOT coalesce(v_paused, false) THEN
        FOR v_cand IN SELECT c.* FROM queen_pop_candidates(v_qid, p_group, p_only, v_now, v_options) c
                      WHERE c.window_open LOOP
            v_open := v_open + 1;
            v_one := v_cand;
            EXIT WHEN v_open > 1;
        END LOOP;
    END IF;

    IF v_open <> 1 THEN
        -- No claim here: the open candidates go to the server, which claims them in a
        -- transaction (they are hints, each checked again under its lock). A second
        -- read, rather than rows kept from the first, so that the first can stop early.
        IF v_open > 1 THEN
            RETURN QUERY SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
                c.id, c.name, c.options, c.seq, c.oldest,
                NULL::uuid, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::json, NULL::timestamptz,
                NULL::text, NULL::boolean
            FROM queen_pop_candidates(v_qid, p_group, p_only, v_now, v_options) AS c
            WHERE c.window_open;
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
        RETURN QUERY SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
            NULL::uuid, NULL::text, NULL::jsonb, NULL::bigint, NULL::timestamptz,
            NULL::uuid, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::json, NULL::timestamptz,
            NULL::text, NULL::boolean;
        RETURN;
    END IF;

    -- Exactly one open candidate: claim it. POP-2: a pair whose lock is held is skipped.
    IF pg_try_advisory_xact_lock(queen_pair_key(v_one.id, p_group)) THEN
        RETURN QUERY SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
            v_one.id, v_one.name, v_one.options, v_one.seq, v_one.oldest,
            v_one.id, m."offset", m.id, m.transaction_id, m.trace_id, m.data, m.created_at,
            m.producer_sub, m.sealed
        FROM queen_claim(v_one.id, p_group, v_options, v_now, p_batch, p_lease, p_lease_secs) AS m;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    -- The claim got nothing.
    RETURN QUERY SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
        v_one.id, v_one.name, v_one.options, v_one.seq, v_one.oldest,
        v_one.id, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::json, NULL::timestamptz,
        NULL::text, NULL::boolean;
END
$fn$;
