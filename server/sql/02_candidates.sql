-- The candidate partitions of a pop: the one definition of "claimable" that the head's
-- walk and POP-15's claimable count both read.
--
-- The partitions of queue `p_qid` with something past group `p_group`'s cursor whose
-- cursor is free at `p_now` (checked again under the pair's lock before a claim),
-- optionally only partition `p_only`; `p_options` is the queue's options row. The head
-- walks them in name order (POP-4); `backlog` is how many retained messages lie past
-- the cursor, which never lies below what retention removed (RET-4), deleted ones left
-- out (MGMT-11); `window_open` is POP-14's windowBuffer. A SQL function, so PostgreSQL
-- inlines it into the statements that read it, and a walk ordered by name reads the
-- (queue_id, name) key in order and stops where its reader stops.
CREATE OR REPLACE FUNCTION queen_pop_candidates(
    p_qid bigint, p_group text, p_only text, p_now timestamptz, p_options jsonb
) RETURNS TABLE (
    id uuid, name text, options jsonb, backlog bigint, window_open boolean
) LANGUAGE sql STABLE AS $fn$
    SELECT p.id, p.name, p_options, b.backlog,
           queen_window_open(p_options, p.last_write_at, p_now)
    FROM queen_partitions p
    LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.consumer_group = p_group
    CROSS JOIN LATERAL (SELECT queen_retained_above(p.id, p.last_offset, p.deleted,
        GREATEST(COALESCE(c.committed, 0), p.removed_through)) AS backlog) b
    WHERE p.queue_id = p_qid AND (p_only IS NULL OR p.name = p_only)
      AND b.backlog > 0
      AND queen_cursor_free(c.lease_deadline, c.not_before, p_now)
$fn$;
