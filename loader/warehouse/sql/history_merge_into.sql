-- The history mode on an Iceberg table, in one MERGE INTO.
--
--   target  : the warehouse table: <columns>, the change metadata, the version columns
--   history : what the changes do to it (history_changes.sql): versions to close and to open
--
-- A key's current version is closed at its first new step; each insert's version is added,
-- valid until the key's next step. Versions are never deleted; merge-on-read writes the closed
-- versions' new rows and the new versions.

MERGE INTO ${target} t
USING history l
ON ${key_join} AND l._loader_action = 'close' AND t._is_current
WHEN MATCHED THEN
    UPDATE SET _valid_to = l._loader_commit_ts,
        _valid_to_seqno = l._loader_seqno,
        _is_current = false,
        _loaded_at = current_timestamp()
WHEN NOT MATCHED AND l._loader_action = 'open' THEN
    INSERT (${columns}, _op, _seqno, _rowno, _commit_ts, _interval, _loaded_at,
            _valid_from, _valid_to, _valid_from_seqno, _valid_to_seqno, _is_current)
    VALUES (${latest_columns}, ${op}, l._loader_seqno, l._loader_row_id, l._loader_commit_ts,
            l._loader_interval, current_timestamp(), l._loader_commit_ts, l._loader_next_commit_ts,
            l._loader_seqno, l._loader_next_seqno, l._loader_next_seqno IS NULL)
