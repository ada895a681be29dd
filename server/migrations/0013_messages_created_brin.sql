-- Analytics (MGMT-13) count the messages created in a window. Rows are appended in about
-- the order they are created, so a block-range index answers "which pages can hold this
-- window" from a few kilobytes, and costs a push next to nothing (ranges are summarised
-- by vacuum, not by the insert).
CREATE INDEX queen_messages_created ON queen_messages USING brin (created_at);
