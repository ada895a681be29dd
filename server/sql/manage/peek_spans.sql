-- MGMT-6: the partitions a peek filter picks (queue $1, partition $2; NULL: any), by
-- queue and name, each with what group $3's state of its messages needs: its floor and
-- end, the group's cursor and live lease span, retries, dead letters, and the offsets
-- an operator deleted (MGMT-11). Messages are then read by key for one page only.
SELECT p.id, q.name AS queue, p.name, p.last_offset, p.removed_through, c.committed,
       CASE WHEN queen_lease_live(c.lease_deadline, now()) THEN c.lease_end END AS lease_end,
       c.retries,
       COALESCE(d.offsets, '{}') AS dead, COALESCE(d.retry_counts, '{}') AS dead_retries,
       CASE WHEN p.deleted = 0 THEN '{}' ELSE ARRAY(
           SELECT z."offset" FROM queen_deleted_offsets z
           WHERE z.partition_id = p.id AND z."offset" > p.removed_through ORDER BY z."offset")
       END AS deleted
FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.consumer_group = $3
LEFT JOIN LATERAL (
    SELECT array_agg(x."offset" ORDER BY x."offset") AS offsets,
           array_agg(x.retry_count ORDER BY x."offset") AS retry_counts
    FROM queen_dead_letters x
    WHERE x.partition_id = p.id AND x.consumer_group = $3 AND x."offset" > p.removed_through
) d ON true
WHERE ($1::text IS NULL OR q.name = $1) AND ($2::text IS NULL OR p.name = $2)
ORDER BY q.name COLLATE "C", p.name COLLATE "C"
