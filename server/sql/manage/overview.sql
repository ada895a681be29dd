-- MGMT-4's overview: queues, partitions, retained and unconsumed messages, groups and
-- dead letters, each counted once over the whole broker.
SELECT (SELECT count(*) FROM queen_queues),
       count(*),
       COALESCE(sum(f.messages), 0)::bigint,
       COALESCE(sum(f.unconsumed), 0)::bigint,
       (SELECT count(*) FROM queen_group_names()),
       (SELECT count(*) FROM queen_dead_letters)
FROM queen_partition_figures() f
