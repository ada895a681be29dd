-- MGMT-13 for the queues a filter picks (queue $4, namespace $5, task $6; NULL: any),
-- as analytics.sql counts every queue: per bucket start (ms) of the window [$1, $2) in
-- buckets of $3 ms, the retained messages (false) and the dead letters (true). Each
-- table's rows are counted per partition and bucket first (`date_bin`, plain timestamp
-- arithmetic), one aggregate per table so each pass stays on its own index and does no
-- join; only those counts are joined to the queues the filter keeps.
WITH counted AS (
    SELECT false AS dead, partition_id,
           date_bin(make_interval(secs => $3::float8 / 1000), created_at, 'epoch') AS b,
           count(*) AS n
    FROM queen_messages WHERE created_at >= $1 AND created_at < $2 GROUP BY 2, 3
    UNION ALL
    SELECT true, partition_id,
           date_bin(make_interval(secs => $3::float8 / 1000), failed_at, 'epoch'), count(*)
    FROM queen_dead_letters WHERE failed_at >= $1 AND failed_at < $2 GROUP BY 2, 3)
SELECT x.dead, (extract(epoch FROM x.b) * 1000)::bigint, sum(x.n)::bigint
FROM counted x
JOIN queen_partitions p ON p.id = x.partition_id
JOIN queen_queues q ON q.id = p.queue_id
WHERE ($4::text IS NULL OR q.name = $4) AND ($5::text IS NULL OR q.namespace = $5)
  AND ($6::text IS NULL OR q.task = $6)
GROUP BY x.dead, x.b
