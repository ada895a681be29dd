-- DLQ-2: one page ($4 limit, $5 offset) of the dead letters in filing order, filtered
-- by queue $1, group $2 and partition $3 (NULL: any; `queen_dead_letters_listed`).
SELECT d.id, d.transaction_id, d.partition_id, d.partition, d.queue, d.consumer_group,
       d.error_message, d.retry_count, d.data, d.sealed, d.created_at, d.failed_at
FROM queen_dead_letters_listed($1, $2, $3) d
ORDER BY d.seq LIMIT $4 OFFSET $5
