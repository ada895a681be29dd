-- A cursor names its partition's queue, which never changes, so the queue listings can
-- count the groups reading a queue by one index probe per group instead of reading
-- every cursor of the queue. The group index gains the column rather than a new index
-- being added: a cursor update that moves `committed` writes an entry in every index of
-- the table, so each index costs every ack.
ALTER TABLE queen_cursors ADD COLUMN queue_id bigint;
UPDATE queen_cursors c SET queue_id = p.queue_id FROM queen_partitions p WHERE p.id = c.partition_id;
ALTER TABLE queen_cursors ALTER COLUMN queue_id SET NOT NULL;
DROP INDEX queen_cursors_group;
CREATE INDEX queen_cursors_group ON queen_cursors (consumer_group, queue_id);
