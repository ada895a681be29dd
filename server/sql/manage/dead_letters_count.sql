-- How many dead letters the filter of dead_letters.sql picks (DLQ-1's total).
SELECT count(*)
FROM queen_dead_letters d
JOIN queen_partitions p ON p.id = d.partition_id
JOIN queen_queues q ON q.id = p.queue_id
LEFT JOIN queen_messages m ON m.partition_id = d.partition_id AND m."offset" = d."offset"
WHERE (m.id IS NOT NULL OR d.message_id IS NOT NULL) AND ($1::text IS NULL OR q.name = $1)
  AND ($2::text IS NULL OR d.consumer_group = $2) AND ($3::text IS NULL OR p.name = $3)
