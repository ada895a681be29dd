-- queen_partition_figures() now returns each partition's own columns beside its figures;
-- PostgreSQL cannot replace a function whose result columns change, so the old one goes
-- here and server/sql/01_rules.sql creates the new one.
DROP FUNCTION IF EXISTS queen_partition_figures();
