-- MGMT-13 for the queues a filter picks (queue $4, namespace $5, task $6; NULL: any),
-- as analytics.sql counts every queue: per bucket start (ms) of the window [$1, $2) in
-- buckets of $3 ms, the retained messages (false) and the dead letters (true). Rows are
-- counted per partition and bucket first (`date_bin`, plain timestamp arithmetic) and
-- only then joined to the queues the filter keeps, so the pass over the window's rows
-- does no join.
WITH counted AS (
    SELECT r.dead, r.partition_id,
           date_bin(make_interval(secs => $3::float8 / 1000), r.at, 'epoch') AS b,
           count(*) AS n
    FROM (SELECT false AS dead, partition_id, created_at AS at FROM queen_messages
          WHERE created_at >= $1 AND created_at < $2
          UNION ALL
          SELECT true, partition_id, failed_at FROM queen_dead_letters
          WHERE failed_at >= $1 AND failed_at < $2) r
    GROUP BY 1, 2, 3)
SELECT c.dead, (extract(epoch FROM c.b) * 1000)::bigint, sum(c.n)::bigint
FROM counted c
JOIN queen_partitions p ON p.id = c.partition_id
JOIN queen_queues q ON q.id = p.queue_id
WHERE ($4::text IS NULL OR q.name = $4) AND ($5::text IS NULL OR q.namespace = $5)
  AND ($6::text IS NULL OR q.task = $6)
GROUP BY c.dead, c.b
