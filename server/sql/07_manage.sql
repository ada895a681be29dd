-- What the management reads (PROTOCOL.md section 17) share beyond the rules of
-- 01_rules.sql: the set of consumer-group names.

-- Every listed group's name (MGMT-3): those with a cursor, found by a loose index scan
-- of `queen_cursors_group` (one index probe per distinct group, not a pass over every
-- cursor), and those with a recorded subscription. Unordered: callers sort bytewise.
CREATE OR REPLACE FUNCTION queen_group_names() RETURNS TABLE (consumer_group text)
LANGUAGE sql STABLE PARALLEL SAFE AS $fn$
    WITH RECURSIVE g(n) AS (
        SELECT min(c.consumer_group) FROM queen_cursors c
        UNION ALL
        SELECT (SELECT min(c.consumer_group) FROM queen_cursors c WHERE c.consumer_group > g.n)
        FROM g WHERE g.n IS NOT NULL)
    SELECT g.n FROM g WHERE g.n IS NOT NULL
    UNION SELECT s.consumer_group FROM queen_subscriptions s
$fn$;
