-- What the merge does, counted from the decided keys (decide.sql): rows inserted, updated and
-- deleted; stale replays and deletes of absent keys change nothing.

SELECT
    count_if(_action = 'insert') AS inserted,
    count_if(_action = 'update') AS updated,
    count_if(_action = 'delete') AS deleted
FROM decided
