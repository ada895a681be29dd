-- How many partitions queue $1 has (every queue's when NULL).
SELECT count(*) FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
WHERE ($1::text IS NULL OR q.name = $1)
