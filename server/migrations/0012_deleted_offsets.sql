-- An operator's delete of one message (MGMT-11) takes its row away but not its offset:
-- offsets are never reused, so cursors and lease spans keep their meaning. The figures
-- count retained messages as offsets minus these, and `deleted` (how many a partition
-- holds above its retention floor) lets a partition without any skip the count.
CREATE TABLE queen_deleted_offsets (
    partition_id uuid NOT NULL REFERENCES queen_partitions (id) ON DELETE CASCADE,
    "offset"     bigint NOT NULL,
    PRIMARY KEY (partition_id, "offset")
);
ALTER TABLE queen_partitions ADD COLUMN deleted bigint NOT NULL DEFAULT 0;
