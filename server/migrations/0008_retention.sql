-- RET-2..4: retention removes a prefix of each partition. `removed_through` is the
-- highest offset removed (0: none), so a cursor that starts or lags below it resumes at
-- the oldest retained message and a count of unconsumed messages (RET-5) needs no scan.
ALTER TABLE queen_partitions ADD COLUMN removed_through bigint NOT NULL DEFAULT 0;

-- RET-4: a dead letter keeps its own copy of the message once retention removes it (NULL
-- while the message is still in its partition, which the listing then reads).
ALTER TABLE queen_dead_letters
    ADD COLUMN message_id uuid,
    ADD COLUMN transaction_id text,
    ADD COLUMN data json,
    ADD COLUMN sealed boolean,
    ADD COLUMN created_at timestamptz;
