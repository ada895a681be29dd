-- The management routes find a consumer group's cursors by its name (MGMT-3, MGMT-9);
-- the primary key leads with the partition.
CREATE INDEX queen_cursors_group ON queen_cursors (consumer_group);
