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

-- Whether a cursor's lease is live at `p_now`: until its deadline (POP-9, ACK-5). A
-- released lease has no deadline (its id goes with it), nor has a missing cursor row.
CREATE OR REPLACE FUNCTION queen_lease_live(p_lease_deadline timestamptz, p_now timestamptz)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT coalesce(p_lease_deadline > p_now, false)
$fn$;

-- Whether a cursor may be claimed at `p_now`: no live lease (ACK-4) and no retryDelay
-- still running (ACK-6). A missing cursor row has both NULL, so it is free.
CREATE OR REPLACE FUNCTION queen_cursor_free(
    p_lease_deadline timestamptz, p_not_before timestamptz, p_now timestamptz
) RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT NOT queen_lease_live(p_lease_deadline, p_now)
       AND coalesce(p_not_before <= p_now, true)
$fn$;

-- The maintenance switches (MAINT-1's push switch, MAINT-2's pop switch): the one reader
-- of `queen_switches`, so a switch without a row is off everywhere alike. A view, so
-- PostgreSQL plans it into each statement that reads it: a write pays no function call.
CREATE OR REPLACE VIEW queen_switch_state AS
    SELECT coalesce(bool_or(s.enabled) FILTER (WHERE s.name = 'push_maintenance'), false)
               AS push_maintenance,
           coalesce(bool_or(s.enabled) FILTER (WHERE s.name = 'pop_maintenance'), false)
               AS pop_maintenance
    FROM queen_switches s;

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

-- How many retained messages a partition holds above offset `p_from` (at or above its
-- floor): its offsets there, less the ones an operator deleted (MGMT-11), which are
-- looked up only when the partition's `p_deleted` count says there are any. Every
-- figure of a partition, a cursor's lag and the pop's backlog is this.
CREATE OR REPLACE FUNCTION queen_retained_above(
    p_partition uuid, p_last_offset bigint, p_deleted bigint, p_from bigint
) RETURNS bigint LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    SELECT p_last_offset - p_from
        - CASE WHEN p_deleted = 0 THEN 0 ELSE queen_deleted_above(p_partition, p_from) END
$fn$;

-- Every partition with its figures (filter them by `id` or `queue_id`): its retained
-- messages, and RET-5's unconsumed ones, those retained above its lowest cursor (all of
-- them when no group has a cursor there), which `maxSize` counts. A SQL function over a
-- set, so PostgreSQL inlines it and a filter on the caller's side reaches the scan.
CREATE OR REPLACE FUNCTION queen_partition_figures() RETURNS TABLE (
    id uuid, queue_id bigint, name text, last_offset bigint, deleted bigint,
    removed_through bigint, messages bigint, unconsumed bigint
) LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    SELECT p.id, p.queue_id, p.name, p.last_offset, p.deleted, p.removed_through,
        queen_retained_above(p.id, p.last_offset, p.deleted, p.removed_through),
        queen_retained_above(p.id, p.last_offset, p.deleted,
                             GREATEST(p.removed_through, coalesce(k.low, 0)))
    FROM queen_partitions p
    -- A join rather than a subquery in the argument: PostgreSQL inlines
    -- queen_retained_above only when no argument it repeats holds a subquery.
    LEFT JOIN LATERAL (SELECT min(c.committed) AS low FROM queen_cursors c
                       WHERE c.partition_id = p.id) k ON true
$fn$;
