-- DLQ-2: one page ($4 limit, $5 offset) of the dead letters in filing order, filtered
-- by queue $1, group $2 and partition $3 (NULL: any). A message retention removed is
-- listed from the dead letter's own copy (RET-4); a deleted one's (MGMT-11) is not.
SELECT COALESCE(m.id, d.message_id) AS id,
       COALESCE(m.transaction_id, d.transaction_id) AS transaction_id,
       p.id AS partition_id, p.name AS partition, q.name AS queue,
       d.consumer_group, d.error_message, d.retry_count,
       COALESCE(m.data, d.data) AS data, COALESCE(m.sealed, d.sealed) AS sealed,
       COALESCE(m.created_at, d.created_at) AS created_at, d.failed_at
FROM queen_dead_letters d
JOIN queen_partitions p ON p.id = d.partition_id
JOIN queen_queues q ON q.id = p.queue_id
LEFT JOIN queen_messages m ON m.partition_id = d.partition_id AND m."offset" = d."offset"
WHERE (m.id IS NOT NULL OR d.message_id IS NOT NULL) AND ($1::text IS NULL OR q.name = $1)
  AND ($2::text IS NULL OR d.consumer_group = $2) AND ($3::text IS NULL OR p.name = $3)
ORDER BY d.seq LIMIT $4 OFFSET $5
