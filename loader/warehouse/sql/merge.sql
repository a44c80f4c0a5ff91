-- Step 3: the table's new rows.
--
--   base    : the current rows of the touched partitions
--   decided : the changed keys and what happens to them (decide.sql)
--
-- Base rows whose key was updated or deleted go; every other base row stays (keys without
-- changes, stale replays); the latest version of inserted and updated keys is written with the
-- change's metadata (_op: merge.op_sql, as in merge_into.sql), and in mode soft_delete the
-- deleted keys' rows as their deletes saw them, marked deleted. Applying
-- the same changes again gives the same rows.

SELECT ${broadcast_decided}${base_columns}, b._op, b._seqno, b._rowno, b._commit_ts, b._interval, b._loaded_at${base_mode_columns}
FROM base b
LEFT ANTI JOIN (SELECT * FROM decided WHERE _loader_action IN ('update', 'delete')) l ON ${key_join}

UNION ALL

SELECT ${latest_columns},
       ${op} AS _op,
       l._loader_seqno AS _seqno,
       l._loader_row_id AS _rowno,
       l._loader_commit_ts AS _commit_ts,
       l._loader_interval AS _interval,
       current_timestamp() AS _loaded_at${mode_values}
FROM decided l
WHERE l._loader_action IN (${written_actions})
