-- The head of a queue-scoped pop, as a function: one round trip that reads the
-- maintenance switch, "now", the queue, the group's subscription and the candidate
-- partitions and, when exactly one candidate is left after POP-14's windowBuffer, claims
-- it under the pair's advisory lock (POP-2), with its lease (POP-9) or its autoAck commit
-- (POP-7), honouring delayedProcessing (POP-14).
--
-- Why a function and not one SQL statement: it was one statement until this migration,
-- and PostgreSQL had to plan that statement afresh (1.4 ms idle, 2-4 ms under load, for
-- about forty subqueries) on every pooled connection whenever VACUUM or ANALYZE changed
-- the statistics of a table it reads; that re-plan landed on woken pops and decided the
-- wake-up p99 (see ARCHITECTURE.md, "Why the woken pop is a function"). Here each step is
-- a small statement with its own cached plan, so a re-plan costs a fraction of that. A
-- second gain: the function is VOLATILE, so every statement takes a fresh snapshot, and
-- the cursor is read after the lock is taken, seeing every commit made under it.
--
-- Rows (the server reads them by position, see `server/src/pg/pop.rs`): the head's five
-- columns, a candidate's six, the candidate whose claim was tried, then a claimed
-- message's six.
-- * A claim was tried: one row per claimed message in offset order, or one row with
--   NULL message columns when the claim got nothing (the pair's lock was held, or the
--   cursor moved, leased or waits out a retryDelay).
-- * No claim was tried (not ready, paused, no candidate, or several): one row per
--   candidate, or one row with NULL candidate columns when there is none.
-- A candidate partition of a pop, as the function keeps them.
CREATE TYPE queen_pop_candidate AS (
    id uuid, name text, options jsonb, last_write_at timestamptz, seq bigint, oldest timestamptz
);

-- The partitions of queue `p_qid` with something past group `p_group`'s cursor, not
-- leased or waiting at `p_now` (checked again under their lock), optionally only
-- partition `p_only`; `p_options` is the queue's options. The oldest unconsumed
-- message's time orders them (POP-4). A SQL function, so PostgreSQL inlines it into the
-- statements that read it.
CREATE FUNCTION queen_pop_candidates(
    p_qid bigint, p_group text, p_only text, p_now timestamptz, p_options jsonb
) RETURNS SETOF queen_pop_candidate LANGUAGE sql STABLE AS $fn$
    SELECT p.id, p.name, p_options, p.last_write_at, p.seq,
           (SELECT m.created_at FROM queen_messages m
            WHERE m.partition_id = p.id AND m."offset" = COALESCE(c.committed, 0) + 1)
    FROM queen_partitions p
    LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
    WHERE p.queue_id = p_qid AND (p_only IS NULL OR p.name = p_only)
      AND p.last_offset > COALESCE(c.committed, 0)
      AND (c.lease_deadline IS NULL OR c.lease_deadline <= p_now)
      AND (c.not_before IS NULL OR c.not_before <= p_now)
$fn$;

CREATE FUNCTION queen_pop_head(
    p_queue text,       -- the queue's name
    p_group text,       -- the consumer group
    p_only text,        -- only this partition (the partition route), or NULL
    p_queue_mode text,  -- the queue-mode group's name: it needs no subscription
    p_batch bigint,     -- the most messages to claim
    p_lease uuid,       -- the lease id, or NULL for autoAck
    p_lease_secs bigint -- the pop's leaseSeconds, or NULL for the queue's leaseTime
) RETURNS TABLE (
    r_paused boolean, r_now timestamptz, r_qid bigint, r_subscribed boolean, r_ready boolean,
    r_id uuid, r_name text, r_options jsonb, r_last_write_at timestamptz, r_seq bigint,
    r_oldest timestamptz,
    r_tried uuid,
    r_offset bigint, r_msg_id uuid, r_transaction_id text, r_trace_id uuid, r_data json,
    r_created_at timestamptz
) LANGUAGE plpgsql VOLATILE
-- Every statement here finds its rows by key. The server plans generically (see
-- `connect_options` in `server/src/pg/mod.rs`), and a generic plan guesses how many
-- partitions a queue has from the table's average: with one queue of 20,000 partitions
-- beside a small one, that guess made every pop of the small queue scan all partitions
-- and all cursors (1.6 ms instead of 0.3, measured). These settings leave the planner
-- the index paths only; they cost nothing measurable per call.
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
AS $fn$
DECLARE
    v_paused boolean;
    v_now timestamptz := now();
    v_qid bigint;
    v_options jsonb;
    v_subscribed boolean := false;
    v_ready boolean;
    v_cand queen_pop_candidate;
    -- Candidates read, how many of them pass the windowBuffer, and the last of those.
    v_seen int := 0;
    v_open int := 0;
    v_one queen_pop_candidate;
    v_window bigint;
    v_delayed bigint;
    v_visible timestamptz;
    v_secs bigint;
    v_cur record;
    v_committed bigint;
BEGIN
    SELECT enabled INTO v_paused FROM queen_switches WHERE name = 'pop_maintenance';
    SELECT id, options INTO v_qid, v_options FROM queen_queues WHERE name = p_queue;
    IF v_qid IS NOT NULL THEN
        v_subscribed := EXISTS (SELECT 1 FROM queen_subscriptions
                                WHERE queue_id = v_qid AND consumer_group = p_group);
    END IF;
    v_ready := v_qid IS NOT NULL AND (p_group = p_queue_mode OR v_subscribed);

    IF v_ready AND NOT coalesce(v_paused, false) THEN
        -- One pass over the candidates, only as far as the second one open to a claim.
        FOR v_cand IN SELECT * FROM queen_pop_candidates(v_qid, p_group, p_only, v_now, v_options) LOOP
            v_seen := v_seen + 1;
            -- POP-14: windowBuffer holds back a partition written to within the window
            -- (the same rule as the server's filter for several candidates).
            v_window := COALESCE((v_cand.options->>'windowBuffer')::bigint, 0);
            IF v_window = 0 OR v_cand.last_write_at IS NULL
               OR v_cand.last_write_at + make_interval(secs => v_window) <= v_now THEN
                v_open := v_open + 1;
                v_one := v_cand;
                EXIT WHEN v_open > 1;
            END IF;
        END LOOP;
    END IF;

    IF v_open <> 1 THEN
        -- No claim here: every candidate goes to the server, which claims them in a
        -- transaction (they are hints, each checked again under its lock). A second
        -- read, rather than rows kept from the first, so that the first can stop early
        -- and nothing grows with the number of partitions but the answer.
        IF v_seen > 0 THEN
            RETURN QUERY SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
                c.id, c.name, c.options, c.last_write_at, c.seq, c.oldest,
                NULL::uuid, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::json, NULL::timestamptz
            FROM queen_pop_candidates(v_qid, p_group, p_only, v_now, v_options) AS c;
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
        RETURN QUERY SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
            NULL::uuid, NULL::text, NULL::jsonb, NULL::timestamptz, NULL::bigint, NULL::timestamptz,
            NULL::uuid, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::json, NULL::timestamptz;
        RETURN;
    END IF;

    -- Exactly one candidate: claim it. POP-2: a pair whose lock is held is skipped.
    IF pg_try_advisory_xact_lock(hashtextextended(v_one.id::text || '/' || p_group, 0)) THEN
        -- A fresh snapshot, taken after the lock: every commit made under it is seen.
        SELECT committed, lease_deadline, not_before INTO v_cur
        FROM queen_cursors WHERE partition_id = v_one.id AND consumer_group = p_group;
        -- ACK-4: never two live leases on one cursor; ACK-6: a retryDelay is waited out.
        IF NOT (coalesce(v_cur.lease_deadline > v_now, false) OR coalesce(v_cur.not_before > v_now, false)) THEN
            v_committed := COALESCE(v_cur.committed, 0);
            -- POP-14: delayedProcessing delivers only messages old enough.
            v_delayed := COALESCE((v_one.options->>'delayedProcessing')::bigint, 0);
            IF v_delayed > 0 THEN
                v_visible := v_now - make_interval(secs => v_delayed);
            END IF;
            IF p_lease IS NOT NULL THEN
                -- POP-9: the pop's leaseSeconds, else the queue's leaseTime.
                v_secs := COALESCE(p_lease_secs, (v_one.options->>'leaseTime')::bigint, 300);
                RETURN QUERY
                WITH m AS (
                    SELECT "offset", id, transaction_id, trace_id, data, created_at FROM queen_messages
                    WHERE partition_id = v_one.id AND "offset" > v_committed
                      AND (v_visible IS NULL OR created_at <= v_visible)
                    ORDER BY "offset" LIMIT p_batch),
                claim AS (
                    INSERT INTO queen_cursors AS k (partition_id, consumer_group, lease_id, lease_end, lease_deadline, lease_duration_ms)
                    SELECT v_one.id, p_group, p_lease, max(m."offset"), v_now + make_interval(secs => v_secs), v_secs * 1000
                    FROM m HAVING count(*) > 0
                    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET lease_id = EXCLUDED.lease_id,
                        lease_end = EXCLUDED.lease_end, lease_deadline = EXCLUDED.lease_deadline,
                        lease_duration_ms = EXCLUDED.lease_duration_ms, not_before = NULL
                    -- The row read above is still the newest: the lock makes this hold,
                    -- and the check keeps a claim from ever overwriting a moved cursor.
                    WHERE k.committed = v_committed
                      AND (k.lease_deadline IS NULL OR k.lease_deadline <= v_now)
                      AND (k.not_before IS NULL OR k.not_before <= v_now)
                    RETURNING 1)
                SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
                    v_one.id, v_one.name, v_one.options, v_one.last_write_at, v_one.seq, v_one.oldest,
                    v_one.id, m."offset", m.id, m.transaction_id, m.trace_id, m.data, m.created_at
                FROM m WHERE EXISTS (SELECT 1 FROM claim) ORDER BY m."offset";
            ELSE
                -- POP-7: autoAck commits at once; retries at or below the new cursor are
                -- forgotten.
                RETURN QUERY
                WITH m AS (
                    SELECT "offset", id, transaction_id, trace_id, data, created_at FROM queen_messages
                    WHERE partition_id = v_one.id AND "offset" > v_committed
                      AND (v_visible IS NULL OR created_at <= v_visible)
                    ORDER BY "offset" LIMIT p_batch),
                claim AS (
                    INSERT INTO queen_cursors AS k (partition_id, consumer_group, committed)
                    SELECT v_one.id, p_group, max(m."offset") FROM m HAVING count(*) > 0
                    ON CONFLICT (partition_id, consumer_group) DO UPDATE SET committed = EXCLUDED.committed,
                        lease_id = NULL, lease_end = NULL, lease_deadline = NULL, lease_duration_ms = NULL,
                        not_before = NULL,
                        retries = COALESCE((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(k.retries) AS e
                                            WHERE e.key::bigint > EXCLUDED.committed), '{}')
                    WHERE k.committed = v_committed
                      AND (k.lease_deadline IS NULL OR k.lease_deadline <= v_now)
                      AND (k.not_before IS NULL OR k.not_before <= v_now)
                    RETURNING 1)
                SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
                    v_one.id, v_one.name, v_one.options, v_one.last_write_at, v_one.seq, v_one.oldest,
                    v_one.id, m."offset", m.id, m.transaction_id, m.trace_id, m.data, m.created_at
                FROM m WHERE EXISTS (SELECT 1 FROM claim) ORDER BY m."offset";
            END IF;
            IF FOUND THEN
                RETURN;
            END IF;
        END IF;
    END IF;
    -- The claim got nothing.
    RETURN QUERY SELECT v_paused, v_now, v_qid, v_subscribed, v_ready,
        v_one.id, v_one.name, v_one.options, v_one.last_write_at, v_one.seq, v_one.oldest,
        v_one.id, NULL::bigint, NULL::uuid, NULL::text, NULL::uuid, NULL::json, NULL::timestamptz;
END
$fn$;
