-- A partition's unconsumed count (RET-5) and the maxSize check start from its lowest
-- cursor: with this index that is one probe per partition instead of reading every
-- group's cursor there. Cursor updates that move a lease already touch an index, so
-- keeping one more costs an ack little.
CREATE INDEX queen_cursors_lowest ON queen_cursors (partition_id, committed);
