-- The pending messages of each partition of queue id $1, by name: group $2's lag there
-- (NULL where it has no cursor), or without a group the largest lag, the lowest
-- cursor's, which is RET-5's unconsumed count.
SELECT p.name, CASE WHEN $2::text IS NOT NULL THEN
        (SELECT queen_retained_above(p.id, p.last_offset, p.deleted,
                                     GREATEST(c.committed, p.removed_through))
         FROM queen_cursors c WHERE c.partition_id = p.id AND c.consumer_group = $2)
     ELSE f.unconsumed END
FROM queen_partition_figures() f JOIN queen_partitions p ON p.id = f.id
WHERE f.queue_id = $1 ORDER BY p.name COLLATE "C"
