-- An ack call's writes (PROTOCOL.md section 4) in one round trip that first checks what
-- they were decided from. The server reads the call's cursors without any lock, lets the
-- reference model decide, and sends here the decisions together with the version (the
-- row's `xmin`) of every cursor it read, NULL for one it found missing. Under the pairs'
-- advisory locks (`queen_pair_key`, taken in the order given, which the server sorts as
-- every waiter does, so no two callers wait on each other in a cycle) each of those rows
-- must still be the version read. Then the cursors are written and the call's dead letters
-- filed in the order given (DLQ-2), and the result is true; the whole call took effect at
-- this point, as if read here. Otherwise nothing is written, the result is false and the
-- server reads and decides again.
--
-- Every write of a cursor row makes a new version with its writer's `xmin`, so an equal
-- `xmin` means an equal row. The function is VOLATILE: the check is a statement of its
-- own, with a fresh snapshot taken after the locks, and sees every commit made under them.
CREATE OR REPLACE FUNCTION queen_ack_write(
    p_lock_partitions uuid[],  -- every pair the call resolved an item to, in locking order
    p_lock_groups text[],
    p_seen bigint[],           -- the xmin of each of those cursors as read, NULL if none
    p_partitions uuid[],       -- the pairs to write
    p_groups text[],
    p_committed bigint[],      -- each one's new cursor
    p_retries text[],          -- its retry counts (a JSON object by offset)
    p_not_before timestamptz[],-- a retryDelay's end (ACK-6), or NULL to keep the old one
    p_release boolean[],       -- whether its lease goes
    p_dead_partitions uuid[],  -- the dead letters, in filing order
    p_dead_offsets bigint[],
    p_dead_groups text[],
    p_dead_errors text[],
    p_dead_retries integer[],
    p_now timestamptz          -- "now" as the decisions read it: the dead letters' time
) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    v_moved bigint;
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_lock_partitions, 1), 0) LOOP
        PERFORM pg_advisory_xact_lock(queen_pair_key(p_lock_partitions[i], p_lock_groups[i]));
    END LOOP;
    SELECT count(*) INTO v_moved
    FROM unnest(p_lock_partitions, p_lock_groups, p_seen) AS k(p, g, seen)
    LEFT JOIN queen_cursors c ON c.partition_id = k.p AND c.consumer_group = k.g
    WHERE c.xmin::text::bigint IS DISTINCT FROM k.seen;
    IF v_moved > 0 THEN
        RETURN false;
    END IF;
    UPDATE queen_cursors c SET committed = x.committed, retries = x.retries::jsonb,
        not_before = coalesce(x.not_before, c.not_before),
        lease_id = CASE WHEN x.release THEN NULL ELSE c.lease_id END,
        lease_end = CASE WHEN x.release THEN NULL ELSE c.lease_end END,
        lease_deadline = CASE WHEN x.release THEN NULL ELSE c.lease_deadline END,
        lease_duration_ms = CASE WHEN x.release THEN NULL ELSE c.lease_duration_ms END
    FROM unnest(p_partitions, p_groups, p_committed, p_retries, p_not_before, p_release)
         AS x(p, g, committed, retries, not_before, release)
    WHERE c.partition_id = x.p AND c.consumer_group = x.g;
    INSERT INTO queen_dead_letters
        (partition_id, "offset", consumer_group, error_message, retry_count, failed_at)
    SELECT d.p, d.o, d.g, d.e, d.r, p_now
    FROM unnest(p_dead_partitions, p_dead_offsets, p_dead_groups, p_dead_errors, p_dead_retries)
         WITH ORDINALITY AS d(p, o, g, e, r, n)
    ORDER BY d.n
    ON CONFLICT DO NOTHING;
    RETURN true;
END
$fn$;
