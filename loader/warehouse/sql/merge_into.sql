-- The merge rule (DESIGN.md section 4) on an Iceberg table, in one MERGE INTO.
--
--   target : the warehouse table: <columns>, _seqno, _commit_ts
--   latest : one row per changed key, its latest change (latest_changes.sql)
--
-- A key whose row in the table is newer than its change keeps that row (the _seqno guard: a
-- replay of an old interval never overwrites a newer change); otherwise a delete removes the
-- row and an insert replaces it or adds it. A delete of a key the table does not have changes
-- nothing. With merge-on-read, the replaced rows become deletion vectors, and only the new rows
-- are written: the cost follows the change, not the table.

MERGE INTO ${target} t
USING latest l
ON ${key_join}
WHEN MATCHED AND t._seqno <= l._loader_seqno AND l._loader_op = 'D' THEN DELETE
WHEN MATCHED AND t._seqno <= l._loader_seqno AND l._loader_op = 'I' THEN
    UPDATE SET ${update_columns}, _seqno = l._loader_seqno, _commit_ts = l._loader_commit_ts
WHEN NOT MATCHED AND l._loader_op = 'I' THEN
    INSERT (${columns}, _seqno, _commit_ts)
    VALUES (${latest_columns}, l._loader_seqno, l._loader_commit_ts)
