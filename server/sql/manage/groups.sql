-- The named groups ($1) over their queues: per (group, queue) the partitions read, the
-- lag, the live leases and the age of the oldest unread message; then the subscribed
-- queues with no cursor yet, marked by `partitions` 0. One pass over the groups'
-- cursors, each joined to its first unread message by the join the caller puts in the
-- slot after `FROM c` (an index probe per cursor, or a hash of the message rows, picked
-- by the tables' sizes).
-- Partitions without deleted offsets (nearly all) find that message at `pos + 1`; the
-- few with deleted offsets search for it and leave out what was deleted (MGMT-11).
WITH c AS NOT MATERIALIZED (
     SELECT c.consumer_group, p.id, p.queue_id, p.last_offset, p.deleted,
            GREATEST(c.committed, p.removed_through) AS pos,
            queen_lease_live(c.lease_deadline, now()) AS leased
     FROM queen_cursors c JOIN queen_partitions p ON p.id = c.partition_id
     WHERE c.consumer_group = ANY($1)
 ), seen AS (
     SELECT c.consumer_group, c.queue_id, c.last_offset - c.pos AS lag, c.leased,
            m.created_at AS first_at
     FROM c FIRST_UNREAD
     WHERE c.deleted = 0
     UNION ALL
     SELECT c.consumer_group, c.queue_id,
            queen_retained_above(c.id, c.last_offset, c.deleted, c.pos), c.leased,
            (SELECT m.created_at FROM queen_messages m
             WHERE m.partition_id = c.id AND m."offset" > c.pos
             ORDER BY m."offset" LIMIT 1)
     FROM c WHERE c.deleted > 0
 )
SELECT s.consumer_group, q.name AS queue, s.partitions, s.lag, s.leased, s.oldest_age_ms
FROM (SELECT consumer_group, queue_id, count(*) AS partitions,
             COALESCE(sum(lag), 0)::bigint AS lag, count(*) FILTER (WHERE leased) AS leased,
             (extract(epoch FROM now() - min(first_at)) * 1000)::bigint AS oldest_age_ms
      FROM seen GROUP BY consumer_group, queue_id) s
JOIN queen_queues q ON q.id = s.queue_id
UNION ALL
SELECT s.consumer_group, q.name, 0, 0, 0, NULL
FROM queen_subscriptions s JOIN queen_queues q ON q.id = s.queue_id
WHERE s.consumer_group = ANY($1)
