-- Step 3: the table's new rows.
--
--   base    : the current rows of the touched partitions
--   decided : the changed keys and what happens to them (decide.sql)
--
-- Base rows whose key was updated or deleted go; every other base row stays (keys without
-- changes, stale replays); the latest version of inserted and updated keys is written with its
-- seqno and commit time. Applying the same changes again gives the same rows.

SELECT ${broadcast_decided}${base_columns}, b._seqno, b._commit_ts
FROM base b
LEFT ANTI JOIN (SELECT * FROM decided WHERE _loader_action IN ('update', 'delete')) l ON ${key_join}

UNION ALL

SELECT ${latest_columns}, l._loader_seqno AS _seqno, l._loader_commit_ts AS _commit_ts
FROM decided l
WHERE l._loader_action IN ('insert', 'update')
