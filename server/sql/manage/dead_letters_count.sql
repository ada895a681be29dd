-- How many dead letters the filter of dead_letters.sql picks (DLQ-1's total).
SELECT count(*) FROM queen_dead_letters_listed($1, $2, $3)
