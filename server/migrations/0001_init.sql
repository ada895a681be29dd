-- The Queen-compatible broker's schema. Partitions are append-only logs with integer
-- offsets; a group's progress is one cursor row per (partition, group); a lease lives on
-- the cursor row it guards. See ARCHITECTURE.md for how rows are locked.

CREATE TABLE queen_queues (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    namespace   text NOT NULL,
    task        text NOT NULL,
    -- Every effective option (CFG-2), as the configure answer shows them.
    options     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX queen_queues_namespace ON queen_queues (namespace);
CREATE INDEX queen_queues_task ON queen_queues (task);

CREATE TABLE queen_partitions (
    id            uuid PRIMARY KEY,
    queue_id      bigint NOT NULL REFERENCES queen_queues (id) ON DELETE CASCADE,
    name          text NOT NULL,
    -- Creation order: the tie-break of POP-4's oldest-first choice.
    seq           bigserial NOT NULL,
    -- The highest offset written (0 when empty); bumped under the row lock by pushes.
    last_offset   bigint NOT NULL DEFAULT 0,
    -- When the partition last received a message (POP-14 windowBuffer).
    last_write_at timestamptz,
    UNIQUE (queue_id, name)
);

CREATE TABLE queen_messages (
    partition_id   uuid NOT NULL REFERENCES queen_partitions (id) ON DELETE CASCADE,
    "offset"       bigint NOT NULL,
    id             uuid NOT NULL,
    transaction_id text NOT NULL,
    trace_id       uuid,
    -- JSON `null` is stored as the jsonb value null, never as SQL NULL.
    data           jsonb NOT NULL,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (partition_id, "offset")
);
-- Dedup (PUSH-5) and ack resolution (ACK-8): the newest offset with a transactionId.
CREATE INDEX queen_messages_txn ON queen_messages (partition_id, transaction_id, "offset" DESC);

CREATE TABLE queen_cursors (
    partition_id      uuid NOT NULL REFERENCES queen_partitions (id) ON DELETE CASCADE,
    consumer_group    text NOT NULL,
    committed         bigint NOT NULL DEFAULT 0,
    -- The lease on (committed, lease_end], if any (ACK-4: at most one per row).
    lease_id          uuid,
    lease_end         bigint,
    lease_deadline    timestamptz,
    lease_duration_ms bigint,
    -- After a failed ack the span comes back only then (ACK-6 retryDelay).
    not_before        timestamptz,
    -- Charged retries per offset above the cursor: {"offset": count} (DLQ-1).
    retries           jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (partition_id, consumer_group)
);
CREATE INDEX queen_cursors_lease ON queen_cursors (lease_id) WHERE lease_id IS NOT NULL;

-- A named group's durable subscription, recorded by its first pop on the queue (POP-13).
CREATE TABLE queen_subscriptions (
    queue_id       bigint NOT NULL REFERENCES queen_queues (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    mode           text NOT NULL,
    from_value     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, consumer_group)
);

-- Dead letters per (message, group) (DLQ-2); `seq` is the filing order.
CREATE TABLE queen_dead_letters (
    seq            bigserial PRIMARY KEY,
    partition_id   uuid NOT NULL REFERENCES queen_partitions (id) ON DELETE CASCADE,
    "offset"       bigint NOT NULL,
    consumer_group text NOT NULL,
    error_message  text,
    retry_count    integer NOT NULL,
    failed_at      timestamptz NOT NULL,
    UNIQUE (partition_id, "offset", consumer_group)
);

-- Switches every server process shares: push and pop maintenance (MAINT-1, MAINT-2).
CREATE TABLE queen_switches (
    name    text PRIMARY KEY,
    enabled boolean NOT NULL
);
INSERT INTO queen_switches (name, enabled) VALUES ('push_maintenance', false), ('pop_maintenance', false);
