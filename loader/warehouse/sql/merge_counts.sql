-- What the merge does, counted from the decided keys (decide.sql): rows inserted, updated and
-- deleted; stale replays and deletes of absent keys change nothing.

SELECT
    count_if(_loader_action = 'insert') AS inserted,
    count_if(_loader_action = 'update') AS updated,
    count_if(_loader_action = 'delete') AS deleted
FROM decided
