-- One page of the listed groups' names, bytewise ($1 limit, NULL for all; $2 offset).
SELECT g.consumer_group FROM queen_group_names() g
ORDER BY g.consumer_group COLLATE "C" LIMIT $1 OFFSET $2
