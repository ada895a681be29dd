-- `data` is returned verbatim (POP-5): `json` keeps the text as written (key order
-- included), where `jsonb` would re-order object keys.
ALTER TABLE queen_messages ALTER COLUMN data TYPE json USING data::json;
