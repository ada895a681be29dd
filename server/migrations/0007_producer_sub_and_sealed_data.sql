-- AUTH-2: a message keeps the `sub` of the token that pushed it, returned by every pop.
-- NULL for a message pushed without authentication (every message written before this).
ALTER TABLE queen_messages ADD COLUMN producer_sub text;

-- ENC-2: a message of a queue with encryptionEnabled is stored sealed (AES-256-GCM):
-- `data` then holds a JSON string, the base64 of nonce and ciphertext, and only the
-- broker's key turns it back into the payload.
ALTER TABLE queen_messages ADD COLUMN sealed boolean NOT NULL DEFAULT false;

-- The pop functions return the new columns and the minted push takes the sub, so their old
-- versions go (CREATE OR REPLACE cannot change a result or an argument list); the server
-- applies the new ones from `server/sql` right after the migrations.
DROP FUNCTION IF EXISTS queen_pop_head(text, text, text, text, bigint, uuid, bigint);
DROP FUNCTION IF EXISTS queen_claim(uuid, text, jsonb, timestamptz, bigint, uuid, bigint);
DROP FUNCTION IF EXISTS queen_push_minted(text[], text[], bigint[], int[], bigint[], uuid[], text[], uuid[], text[], text[]);
DELETE FROM queen_functions;
