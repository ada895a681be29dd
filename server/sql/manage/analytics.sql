-- MGMT-13: counts per bucket start (ms) of the window [$1, $2) in buckets of $3 ms: the
-- retained messages (false), then the dead letters (true). A message row is retained
-- while it exists: the retention sweep deletes rows in the transaction that moves a
-- partition's floor. Every queue is counted: the pass over the window's rows joins
-- nothing (analytics_filtered.sql counts the queues a filter picks).
SELECT false, (extract(epoch FROM b) * 1000)::bigint, n FROM (
    SELECT date_bin(make_interval(secs => $3::float8 / 1000), created_at, 'epoch') AS b,
           count(*) AS n
    FROM queen_messages WHERE created_at >= $1 AND created_at < $2 GROUP BY 1) m
UNION ALL
SELECT true, (extract(epoch FROM b) * 1000)::bigint, n FROM (
    SELECT date_bin(make_interval(secs => $3::float8 / 1000), failed_at, 'epoch') AS b,
           count(*) AS n
    FROM queen_dead_letters WHERE failed_at >= $1 AND failed_at < $2 GROUP BY 1) d
