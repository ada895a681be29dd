-- A pop walks a queue's partitions in name order from where the group last claimed
-- (POP-4, our choice), through the (queue_id, name) key the table already has, so it
-- reads the partitions it passes, not the whole queue. The pop functions change their
-- arguments and result columns (claims of several partitions and held locks come back
-- from the head), which CREATE OR REPLACE cannot do, so their old versions go here.
DROP FUNCTION IF EXISTS queen_pop_head(text, text, text, text, bigint, uuid, bigint);
DROP FUNCTION IF EXISTS queen_pop_candidates(bigint, text, text, timestamptz, jsonb);
