-- The queues per namespace ($1 true) or per task ($1 false), by name (MGMT-4).
SELECT CASE WHEN $1 THEN q.namespace ELSE q.task END AS name, count(*)
FROM queen_queues q GROUP BY 1
ORDER BY (CASE WHEN $1 THEN q.namespace ELSE q.task END) COLLATE "C"
