-- The claim of one partition for one group: where a pop leases, or with autoAck moves a
-- cursor (the engine moves it back only when it cannot answer what it claimed, ENC-3).
-- Both the head's claim of a lone candidate and the server's claim loop call it.
--
-- The caller holds the pair's advisory lock (`queen_pair_key`). The function is
-- VOLATILE, so its first statement takes a fresh snapshot after that lock and sees every
-- commit made under it. It reads the cursor; a live lease (ACK-4) or a running
-- retryDelay (ACK-6) means no claim. Otherwise it reads at most `p_batch` messages past
-- the cursor that POP-14's delayedProcessing lets through, and either leases them
-- (`p_lease`, for `queen_lease_seconds`, POP-9) or commits them at once (autoAck, POP-7,
-- forgetting retries at or below the new cursor). Offsets are contiguous (pushes assign
-- them under the partition lock), so the span ends at the highest offset read. The
-- upsert repeats the cursor check as its guard, so a claim can never overwrite a cursor
-- that moved. A cursor below what retention removed counts from there (RET-4). Rows: the
-- claimed messages in offset order; none when nothing was claimed.
CREATE OR REPLACE FUNCTION queen_claim(
    p_partition uuid, p_group text, p_options jsonb, p_now timestamptz, p_batch bigint,
    p_lease uuid, p_lease_secs bigint
) RETURNS TABLE (
    "offset" bigint, id uuid, transaction_id text, trace_id uuid, data json,
    created_at timestamptz, producer_sub text, sealed boolean
) LANGUAGE plpgsql VOLATILE
-- Sorts and bitmap scans allowed, also when the pop head (which turns them off for its
-- walk) calls it: a claim's statements are planned for a claim, not for a walk.
SET enable_sort = on SET enable_bitmapscan = on
AS $fn$
#variable_conflict use_column
DECLARE
    v_cur record;
    v_seen bigint;
    v_committed bigint;
    v_queue bigint;
    v_visible timestamptz := queen_visible_before(p_options, p_now);
    v_secs bigint;
BEGIN
    SELECT k.committed, k.lease_deadline, k.not_before INTO v_cur
    FROM queen_cursors k WHERE k.partition_id = p_partition AND k.consumer_group = p_group;
    IF FOUND AND NOT queen_cursor_free(v_cur.lease_deadline, v_cur.not_before, p_now) THEN
        RETURN;
    END IF;
    v_seen := COALESCE(v_cur.committed, 0);
    SELECT GREATEST(v_seen, p.removed_through), p.queue_id INTO v_committed, v_queue
    FROM queen_partitions p WHERE p.id = p_partition;
    IF p_lease IS NOT NULL THEN
        v_secs := queen_lease_seconds(p_lease_secs, p_options);
    END IF;
    -- One statement for both kinds: a lease leaves `committed` and the retries alone, an
    -- autoAck commit clears any lease. (Folding the cursor read above into it as a CTE
    -- made the consume benchmark slower: docs/decisions/0003-sql-functions.md.)
    RETURN QUERY
    WITH m AS (
        SELECT q."offset", q.id, q.transaction_id, q.trace_id, q.data, q.created_at,
               q.producer_sub, q.sealed
        FROM queen_messages q
        WHERE q.partition_id = p_partition AND q."offset" > v_committed
          AND (v_visible IS NULL OR q.created_at <= v_visible)
        ORDER BY q."offset" LIMIT p_batch),
    claim AS (
        INSERT INTO queen_cursors AS k (partition_id, consumer_group, queue_id, committed,
                                        lease_id, lease_end, lease_deadline, lease_duration_ms)
        SELECT p_partition, p_group, v_queue,
               CASE WHEN p_lease IS NULL THEN max(m."offset") ELSE v_committed END, p_lease,
               CASE WHEN p_lease IS NOT NULL THEN max(m."offset") END,
               p_now + make_interval(secs => v_secs), v_secs * 1000
        FROM m HAVING count(*) > 0
        ON CONFLICT (partition_id, consumer_group) DO UPDATE SET
            committed = EXCLUDED.committed,
            lease_id = EXCLUDED.lease_id, lease_end = EXCLUDED.lease_end,
            lease_deadline = EXCLUDED.lease_deadline,
            lease_duration_ms = EXCLUDED.lease_duration_ms, not_before = NULL,
            retries = CASE WHEN p_lease IS NOT NULL THEN k.retries
                ELSE COALESCE((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(k.retries) AS e
                               WHERE e.key::bigint > EXCLUDED.committed), '{}') END
        WHERE k.committed = v_seen
          AND queen_cursor_free(k.lease_deadline, k.not_before, p_now)
        RETURNING 1)
    SELECT m.* FROM m WHERE EXISTS (SELECT 1 FROM claim) ORDER BY m."offset";
END
$fn$;
