-- queen_push_minted() no longer takes the queues to notify: other processes are told of a
-- push after it commits (server/src/pg/notify.rs). The old signature goes here and
-- server/sql/05_push_minted.sql creates the new one.
DROP FUNCTION IF EXISTS queen_push_minted(text[], text[], bigint[], int[], bigint[], uuid[], text[], uuid[], text[], text[], text[]);
