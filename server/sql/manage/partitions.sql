-- One page ($2 limit, $3 offset) of the partitions of queue $1 (of every queue when
-- NULL), by queue and name, with their retained messages. The groups are counted for
-- the page only, not for the rows the offset skips.
SELECT x.*, (SELECT count(*) FROM queen_cursors c WHERE c.partition_id = x.id) AS groups
FROM (SELECT p.id, q.name AS queue, p.name,
             queen_retained_above(p.id, p.last_offset, p.deleted, p.removed_through) AS messages,
             p.last_offset
      FROM queen_partitions p JOIN queen_queues q ON q.id = p.queue_id
      WHERE ($1::text IS NULL OR q.name = $1)
      ORDER BY q.name COLLATE "C", p.name COLLATE "C" LIMIT $2 OFFSET $3) x
ORDER BY x.queue COLLATE "C", x.name COLLATE "C"
