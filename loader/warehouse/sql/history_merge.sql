-- The history mode on a Hive-format table: the touched partitions' new rows.
--
--   base    : the current rows of the touched partitions
--   history : what the changes do to them (history_changes.sql, with base as its target)
--
-- Every base row stays; a key's current version is closed at its first new step; each
-- insert's version is added, valid until the key's next step.

SELECT ${base_columns}, b._op, b._seqno, b._rowno, b._commit_ts, b._interval,
       CASE WHEN l._loader_seqno IS NULL THEN b._loaded_at ELSE current_timestamp() END AS _loaded_at,
       b._valid_from,
       coalesce(l._loader_commit_ts, b._valid_to) AS _valid_to,
       b._valid_from_seqno,
       coalesce(l._loader_seqno, b._valid_to_seqno) AS _valid_to_seqno,
       b._is_current AND l._loader_seqno IS NULL AS _is_current
FROM base b
LEFT JOIN (SELECT * FROM history WHERE _loader_action = 'close') l ON ${key_join} AND b._is_current

UNION ALL

SELECT ${latest_columns}, ${op} AS _op, l._loader_seqno AS _seqno, l._loader_row_id AS _rowno,
       l._loader_commit_ts AS _commit_ts, l._loader_interval AS _interval, current_timestamp() AS _loaded_at,
       l._loader_commit_ts AS _valid_from, l._loader_next_commit_ts AS _valid_to,
       l._loader_seqno AS _valid_from_seqno, l._loader_next_seqno AS _valid_to_seqno,
       l._loader_next_seqno IS NULL AS _is_current
FROM history l
WHERE l._loader_action = 'open'
