-- One round of the retention job (RET-2..4): for every partition of a queue whose options
-- remove something, remove the longest prefix of removable messages, at most `p_batch`
-- per partition, and move what pointed at them.
--
-- A message is removable once it is older than the queue's age limit (`maxWaitTimeSeconds`,
-- or `retentionSeconds` under `retentionEnabled`), or older than
-- `completedRetentionSeconds` (under `retentionEnabled`) and committed by every group with a
-- cursor on its partition, of which there is at least one. Removal stops at the first
-- message that is not (RET-2: a prefix); a deleted offset holds none (MGMT-11). A dead
-- letter of a removed message takes its own copy first; cursors below the new floor move
-- up to it, forgetting the retries of removed offsets, and a lease left with nothing is
-- released (RET-4).
--
-- Cursors are changed under their pairs' advisory locks (`queen_pair_key`), as pops and
-- acks change them; a partition with a pair busy right now is left for the next round.
-- Returns the number of messages removed.
CREATE OR REPLACE FUNCTION queen_retention_sweep(p_batch bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    r record;
    v_floor bigint;
    v_min bigint;
    v_busy boolean;
    v_total bigint := 0;
BEGIN
    FOR r IN
        SELECT p.id, p.removed_through, p.last_offset, x.any_age, x.done_age
        FROM queen_queues q
        CROSS JOIN LATERAL (SELECT
            CASE WHEN coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) > 0
                   AND coalesce((q.options->>'retentionEnabled')::boolean, false)
                   AND coalesce((q.options->>'retentionSeconds')::bigint, 0) > 0
                 THEN least((q.options->>'maxWaitTimeSeconds')::bigint,
                            (q.options->>'retentionSeconds')::bigint)
                 WHEN coalesce((q.options->>'maxWaitTimeSeconds')::bigint, 0) > 0
                 THEN (q.options->>'maxWaitTimeSeconds')::bigint
                 WHEN coalesce((q.options->>'retentionEnabled')::boolean, false)
                   AND coalesce((q.options->>'retentionSeconds')::bigint, 0) > 0
                 THEN (q.options->>'retentionSeconds')::bigint END AS any_age,
            CASE WHEN coalesce((q.options->>'retentionEnabled')::boolean, false)
                   AND coalesce((q.options->>'completedRetentionSeconds')::bigint, 0) > 0
                 THEN (q.options->>'completedRetentionSeconds')::bigint END AS done_age) x
        JOIN queen_partitions p ON p.queue_id = q.id
        WHERE (x.any_age IS NOT NULL OR x.done_age IS NOT NULL)
          AND p.last_offset > p.removed_through
        ORDER BY p.id
    LOOP
        SELECT min(c.committed) INTO v_min FROM queen_cursors c WHERE c.partition_id = r.id;
        SELECT coalesce(min(m."offset") - 1, least(r.last_offset, r.removed_through + p_batch))
        INTO v_floor
        FROM queen_messages m
        WHERE m.partition_id = r.id AND m."offset" > r.removed_through
          AND m."offset" <= least(r.last_offset, r.removed_through + p_batch)
          AND NOT (coalesce(m.created_at <= now() - make_interval(secs => r.any_age), false)
                   OR coalesce(m.created_at <= now() - make_interval(secs => r.done_age)
                               AND m."offset" <= v_min, false));
        CONTINUE WHEN v_floor <= r.removed_through;
        SELECT bool_or(NOT pg_try_advisory_xact_lock(queen_pair_key(r.id, c.consumer_group)))
        INTO v_busy
        FROM queen_cursors c WHERE c.partition_id = r.id AND c.committed < v_floor;
        CONTINUE WHEN coalesce(v_busy, false);
        UPDATE queen_dead_letters d
        SET message_id = m.id, transaction_id = m.transaction_id, data = m.data,
            sealed = m.sealed, created_at = m.created_at
        FROM queen_messages m
        WHERE d.partition_id = r.id AND d."offset" > r.removed_through AND d."offset" <= v_floor
          AND d.message_id IS NULL
          AND m.partition_id = d.partition_id AND m."offset" = d."offset";
        DELETE FROM queen_messages m
        WHERE m.partition_id = r.id AND m."offset" > r.removed_through AND m."offset" <= v_floor;
        v_total := v_total + (v_floor - r.removed_through);
        UPDATE queen_cursors c
        SET committed = v_floor,
            retries = COALESCE((SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(c.retries) AS e
                                WHERE e.key::bigint > v_floor), '{}'),
            lease_id = CASE WHEN c.lease_end <= v_floor THEN NULL ELSE c.lease_id END,
            lease_deadline = CASE WHEN c.lease_end <= v_floor THEN NULL ELSE c.lease_deadline END,
            lease_duration_ms = CASE WHEN c.lease_end <= v_floor THEN NULL ELSE c.lease_duration_ms END,
            lease_end = CASE WHEN c.lease_end <= v_floor THEN NULL ELSE c.lease_end END
        WHERE c.partition_id = r.id AND c.committed < v_floor;
        -- Deleted offsets below the floor are now counted as removed (MGMT-11).
        WITH gone AS (DELETE FROM queen_deleted_offsets d
                      WHERE d.partition_id = r.id AND d."offset" <= v_floor RETURNING 1)
        UPDATE queen_partitions
        SET removed_through = v_floor, deleted = deleted - (SELECT count(*) FROM gone)
        WHERE id = r.id;
    END LOOP;
    RETURN v_total;
END
$fn$;
