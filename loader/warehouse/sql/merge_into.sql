-- The merge rule (DESIGN.md section 4) on an Iceberg table, in one MERGE INTO.
--
--   target : the warehouse table: <columns>, the change metadata (loader.core.modes: _op, _seqno,
--            _rowno, _commit_ts, _interval, _loaded_at), the mode's own columns
--   latest : one row per changed key, its latest change (latest_changes.sql)
--
-- A key whose row in the table is as new as its change or newer keeps that row (the _seqno
-- guard: a replay of an old interval never overwrites a newer change, and leaves the rows of the
-- changes it repeats as the interval that first brought them wrote them); otherwise, in mode
-- mirror, a delete removes the row and an insert replaces it or adds it; in mode
-- soft_delete a delete writes the row as the delete saw it, marked deleted. _op says whether
-- the key had a row before the change's transaction (merge.op_sql). A delete of a key the
-- table does not have changes nothing in a mirror. With merge-on-read, the replaced rows become
-- deletion vectors, and only the new rows are written: the cost follows the change, not the table.

MERGE INTO ${target} t
USING latest l
ON ${key_join}
${when_deleted}
WHEN MATCHED AND t._seqno < l._loader_seqno${written} THEN
    UPDATE SET ${update_columns},
        _op = ${matched_op},
        _seqno = l._loader_seqno,
        _rowno = l._loader_row_id,
        _commit_ts = l._loader_commit_ts,
        _interval = l._loader_interval,
        _loaded_at = current_timestamp()${update_mode_columns}
WHEN NOT MATCHED${written} THEN
    INSERT (${columns}, _op, _seqno, _rowno, _commit_ts, _interval, _loaded_at${mode_columns})
    VALUES (${latest_columns}, ${new_op}, l._loader_seqno, l._loader_row_id, l._loader_commit_ts,
            l._loader_interval, current_timestamp()${mode_values})
