-- The figures of the queues a filter picks ($1 namespace, $2 task, $3 name; NULL picks
-- every one), by name, one page of them ($4 limit, $5 offset). The groups reading a
-- queue are counted by one probe of `queen_cursors_group` per listed group, not by
-- reading the queue's cursors, which number its partitions times its groups.
WITH names AS MATERIALIZED (SELECT g.consumer_group FROM queen_group_names() g)
SELECT q.name, q.namespace, q.task, q.options,
    (SELECT count(*) FROM queen_partitions p WHERE p.queue_id = q.id) AS partitions,
    COALESCE(f.messages, 0)::bigint AS messages, COALESCE(f.unconsumed, 0)::bigint AS unconsumed,
    (SELECT count(*) FROM names g WHERE EXISTS (SELECT 1 FROM queen_cursors c
       WHERE c.consumer_group = g.consumer_group AND c.queue_id = q.id)) AS groups,
    (SELECT count(*) FROM queen_dead_letters d
       JOIN queen_partitions p ON p.id = d.partition_id WHERE p.queue_id = q.id) AS dead
FROM queen_queues q
LEFT JOIN LATERAL (SELECT sum(x.messages) AS messages, sum(x.unconsumed) AS unconsumed
    FROM queen_partition_figures() x WHERE x.queue_id = q.id) f ON true
WHERE ($1::text IS NULL OR q.namespace = $1) AND ($2::text IS NULL OR q.task = $2)
  AND ($3::text IS NULL OR q.name = $3)
ORDER BY q.name COLLATE "C" LIMIT $4 OFFSET $5
