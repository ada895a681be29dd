-- MGMT-7: the message at offset $2 of partition $1 as each group reading the partition
-- sees it (MGMT-6's four states, and the group's lease deadline, read while `leased`), by
-- group; one row with a NULL group when none reads it.
SELECT g.consumer_group AS grp,
    m.id, m.transaction_id, m.trace_id, p.id AS partition_id, q.name AS queue,
    p.name AS partition, m.data, m.sealed, m.created_at, m.producer_sub,
    CASE WHEN d.seq IS NOT NULL THEN 'deadLettered'
         WHEN c.committed IS NOT NULL AND m."offset" <= c.committed THEN 'completed'
         WHEN m."offset" <= c.lease_end AND queen_lease_live(c.lease_deadline, now()) THEN 'leased'
         ELSE 'pending' END AS status,
    COALESCE(d.retry_count, (c.retries ->> m."offset"::text)::int, 0) AS retry_count,
    d.error_message, c.lease_deadline
FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
JOIN queen_messages m ON m.partition_id = p.id AND m."offset" = $2
LEFT JOIN (SELECT consumer_group FROM queen_cursors WHERE partition_id = $1) g ON true
LEFT JOIN queen_cursors c ON c.partition_id = p.id AND c.consumer_group = g.consumer_group
LEFT JOIN queen_dead_letters d ON d.partition_id = p.id AND d."offset" = m."offset"
     AND d.consumer_group = g.consumer_group
WHERE p.id = $1 ORDER BY g.consumer_group COLLATE "C"
