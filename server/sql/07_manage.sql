-- What the management reads (PROTOCOL.md section 17) share beyond the rules of
-- 01_rules.sql: the set of consumer-group names.

-- Every listed group's name (MGMT-3): those with a cursor, found by a loose index scan
-- of `queen_cursors_group` (one index probe per distinct group, not a pass over every
-- cursor), and those with a recorded subscription. Unordered: callers sort bytewise.
CREATE OR REPLACE FUNCTION queen_group_names() RETURNS TABLE (consumer_group text)
LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    WITH RECURSIVE g(n) AS (
        SELECT min(c.consumer_group) FROM queen_cursors c
        UNION ALL
        SELECT (SELECT min(c.consumer_group) FROM queen_cursors c WHERE c.consumer_group > g.n)
        FROM g WHERE g.n IS NOT NULL)
    SELECT g.n FROM g WHERE g.n IS NOT NULL
    UNION SELECT s.consumer_group FROM queen_subscriptions s
$fn$;

-- The dead letters a DLQ-2 filter picks (queue, group, partition; NULL: any), each with
-- what its listing shows: the message's own row while it is retained, else the copy the
-- dead letter kept when retention removed it (RET-4) or an operator deleted it (MGMT-11).
-- A SQL function over a set, so the page and its count share one definition and
-- PostgreSQL inlines it into both.
CREATE OR REPLACE FUNCTION queen_dead_letters_listed(
    p_queue text, p_group text, p_partition text
) RETURNS TABLE (
    seq bigint, id uuid, transaction_id text, partition_id uuid, partition text, queue text,
    consumer_group text, error_message text, retry_count integer, data json, sealed boolean,
    created_at timestamptz, failed_at timestamptz
) LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    SELECT d.seq, COALESCE(m.id, d.message_id), COALESCE(m.transaction_id, d.transaction_id),
           p.id, p.name, q.name, d.consumer_group, d.error_message, d.retry_count,
           COALESCE(m.data, d.data), COALESCE(m.sealed, d.sealed),
           COALESCE(m.created_at, d.created_at), d.failed_at
    FROM queen_dead_letters d
    JOIN queen_partitions p ON p.id = d.partition_id
    JOIN queen_queues q ON q.id = p.queue_id
    LEFT JOIN queen_messages m ON m.partition_id = d.partition_id AND m."offset" = d."offset"
    WHERE (m.id IS NOT NULL OR d.message_id IS NOT NULL)
      AND (p_queue IS NULL OR q.name = p_queue)
      AND (p_group IS NULL OR d.consumer_group = p_group)
      AND (p_partition IS NULL OR p.name = p_partition)
$fn$;
