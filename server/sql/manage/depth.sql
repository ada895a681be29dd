-- The pending messages of each partition of queue id $1, by name: group $2's lag there
-- (NULL where it has no cursor), or without a group the largest lag, the lowest
-- cursor's, which is RET-5's unconsumed count. Each branch runs only when $2 picks it
-- (a one-time filter), so a group's lag never pays for the lowest cursor's lookup.
SELECT name, pending FROM (
    SELECT f.name, f.unconsumed AS pending
    FROM queen_partition_figures() f
    WHERE $2::text IS NULL AND f.queue_id = $1
    UNION ALL
    SELECT p.name, (SELECT queen_retained_above(p.id, p.last_offset, p.deleted,
                                                GREATEST(c.committed, p.removed_through))
                    FROM queen_cursors c
                    WHERE c.partition_id = p.id AND c.consumer_group = $2)
    FROM queen_partitions p
    WHERE $2::text IS NOT NULL AND p.queue_id = $1) d
ORDER BY name COLLATE "C"
