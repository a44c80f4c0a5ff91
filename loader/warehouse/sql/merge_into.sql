-- The merge rule (DESIGN.md section 4) on an Iceberg table, in one MERGE INTO.
--
--   target : the warehouse table: <columns>, the change metadata (loader.modes: _op, _seqno,
--            _rowno, _commit_ts, _interval, _loaded_at)
--   latest : one row per changed key, its latest change (latest_changes.sql)
--
-- A key whose row in the table is as new as its change or newer keeps that row (the _seqno
-- guard: a replay of an old interval never overwrites a newer change, and leaves the rows of the
-- changes it repeats as the interval that first brought them wrote them); otherwise a delete
-- removes the row and an insert replaces it (_op u, or c when these changes deleted the key in
-- an earlier transaction) or adds it (c, or u when they inserted it in an earlier one). A delete of a key the table does not have changes
-- nothing. With merge-on-read, the replaced rows become deletion vectors, and only the new rows
-- are written: the cost follows the change, not the table.

MERGE INTO ${target} t
USING latest l
ON ${key_join}
WHEN MATCHED AND t._seqno < l._loader_seqno AND l._loader_op = 'D' THEN DELETE
WHEN MATCHED AND t._seqno < l._loader_seqno AND l._loader_op = 'I' THEN
    UPDATE SET ${update_columns},
        _op = CASE WHEN l._loader_prev_op = 'D' THEN 'c' ELSE 'u' END,
        _seqno = l._loader_seqno,
        _rowno = l._loader_row_id,
        _commit_ts = l._loader_commit_ts,
        _interval = l._loader_interval,
        _loaded_at = current_timestamp()
WHEN NOT MATCHED AND l._loader_op = 'I' THEN
    INSERT (${columns}, _op, _seqno, _rowno, _commit_ts, _interval, _loaded_at)
    VALUES (${latest_columns}, CASE WHEN l._loader_prev_op = 'I' THEN 'u' ELSE 'c' END, l._loader_seqno,
            l._loader_row_id, l._loader_commit_ts, l._loader_interval, current_timestamp())
