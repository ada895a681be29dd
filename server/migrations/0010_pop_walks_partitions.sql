-- A pop walks a queue's partitions in creation order from where the group last claimed
-- (POP-4, our choice), so it reads the partitions it passes, not the whole queue: an
-- index for that walk. The pop functions change their arguments and result columns
-- (claims of several partitions and held locks come back from the head), which CREATE
-- OR REPLACE cannot do, so their old versions go here.
CREATE INDEX queen_partitions_walk ON queen_partitions (queue_id, seq);
DROP FUNCTION IF EXISTS queen_pop_head(text, text, text, text, bigint, uuid, bigint);
DROP FUNCTION IF EXISTS queen_pop_candidates(bigint, text, text, timestamptz, jsonb);
