-- The small rules every statement shares, each written once. They are SQL functions
-- marked IMMUTABLE, so PostgreSQL inlines them into the statements that call them and
-- a call costs nothing a hand-written expression would not.

-- The advisory-lock key of one (partition, group). Pops try it, acks and extends wait
-- for it, so the claims and commits of a pair serialise (ACK-4, POP-2) without locking
-- the cursor row, which may not exist yet.
CREATE OR REPLACE FUNCTION queen_pair_key(p_partition uuid, p_group text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT hashtextextended(p_partition::text || '/' || p_group, 0)
$fn$;

-- Whether a cursor may be claimed at `p_now`: no live lease (ACK-4) and no retryDelay
-- still running (ACK-6). A missing cursor row has both NULL, so it is free.
CREATE OR REPLACE FUNCTION queen_cursor_free(
    p_lease_deadline timestamptz, p_not_before timestamptz, p_now timestamptz
) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT coalesce(p_lease_deadline <= p_now, true) AND coalesce(p_not_before <= p_now, true)
$fn$;

-- POP-14 windowBuffer: a partition written to within the window is held back. The
-- options are the queue's stored row, which always holds every option (the table's
-- CHECK says so), so no default is repeated here.
CREATE OR REPLACE FUNCTION queen_window_open(
    p_options jsonb, p_last_write_at timestamptz, p_now timestamptz
) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT (p_options->>'windowBuffer')::bigint = 0 OR p_last_write_at IS NULL
        OR p_last_write_at + make_interval(secs => (p_options->>'windowBuffer')::bigint) <= p_now
$fn$;

-- POP-14 delayedProcessing: only messages created at or before this time are delivered;
-- NULL when the queue delays nothing.
CREATE OR REPLACE FUNCTION queen_visible_before(p_options jsonb, p_now timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT CASE WHEN (p_options->>'delayedProcessing')::bigint > 0
                THEN p_now - make_interval(secs => (p_options->>'delayedProcessing')::bigint) END
$fn$;

-- POP-9: a lease lasts the pop's leaseSeconds, else the queue's leaseTime.
CREATE OR REPLACE FUNCTION queen_lease_seconds(p_pop_secs bigint, p_options jsonb)
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT coalesce(p_pop_secs, (p_options->>'leaseTime')::bigint)
$fn$;

-- How many offsets above `p_from` of a partition hold a deleted message (MGMT-11). The
-- figures are offsets minus these; callers ask only when the partition's `deleted`
-- count says there are any, so a partition without deletes costs nothing.
CREATE OR REPLACE FUNCTION queen_deleted_above(p_partition uuid, p_from bigint)
RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    SELECT count(*) FROM queen_deleted_offsets d
    WHERE d.partition_id = p_partition AND d."offset" > p_from
$fn$;
