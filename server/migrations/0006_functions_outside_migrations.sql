-- The SQL functions move out of the migrations into `server/sql/*.sql`, which the server
-- applies with CREATE OR REPLACE after the migrations at every start, so a change to a
-- function is an edit of its one file. The pop functions change their result columns,
-- which CREATE OR REPLACE cannot do, so their old versions go here (the push function
-- keeps its signature and is simply replaced).
DROP FUNCTION IF EXISTS queen_pop_head(text, text, text, text, bigint, uuid, bigint);
DROP FUNCTION IF EXISTS queen_pop_candidates(bigint, text, text, timestamptz, jsonb);
DROP TYPE IF EXISTS queen_pop_candidate;

-- The SQL rules read the options the server writes (every option, always: the wire type
-- has no defaults of its own on the way in), so no default is written twice; a row
-- without them is refused.
ALTER TABLE queen_queues ADD CONSTRAINT queen_queues_options_complete CHECK (
    coalesce(jsonb_typeof(options->'leaseTime') = 'number'
             AND jsonb_typeof(options->'windowBuffer') = 'number'
             AND jsonb_typeof(options->'delayedProcessing') = 'number', false)
);

-- The function files as last applied, so a start applies them only when one changed:
-- replacing a function drops every connection's cached plans of the statements in it.
CREATE TABLE queen_functions (
    file   text PRIMARY KEY,
    source text NOT NULL
);
