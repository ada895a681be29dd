-- How many queues the filter of queues.sql picks ($1 namespace, $2 task).
SELECT count(*) FROM queen_queues q
WHERE ($1::text IS NULL OR q.namespace = $1) AND ($2::text IS NULL OR q.task = $2)
