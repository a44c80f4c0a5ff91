-- Step 2: what the merge does with each changed key, decided against the key's base row.
--
--   latest : one row per changed key (latest_changes.sql)
--   base   : the current rows of the partitions the changes touch: <columns>, the change metadata,
--            the mode's own columns
--
-- _loader_action is
--   stale  : the base row is as new as the change or newer (a replay); the base row stays
--   insert : an insert of a key the table does not have
--   update : an insert of a key the table has; its base row goes
--   delete : a delete of a key the table has; its base row goes
--   none   : a delete of a key the table does not have
-- and _loader_had_row whether the table has a live row of the key (soft_delete: not one marked
-- deleted), which decides the _op of the row written when the changes do not tell.
--
-- The result is as small as the change set. The base table is only scanned for its key and
-- _seqno columns (and soft_delete's mark), joined against the changes; the broadcast_
-- placeholders are broadcast hints when the change set is small enough, else nothing.

WITH matched AS (
    SELECT ${broadcast_latest}${base_key_columns}, b._seqno, ${base_live} AS _loader_live
    FROM base b
    LEFT SEMI JOIN latest l ON ${key_join}
)
SELECT ${broadcast_matched}l.*,
       CASE
           WHEN b._seqno >= l._loader_seqno THEN 'stale'
           WHEN l._loader_op = 'I' AND b._seqno IS NULL THEN 'insert'
           WHEN l._loader_op = 'I' THEN 'update'
           WHEN b._seqno IS NULL THEN 'none'
           ELSE 'delete'
       END AS _loader_action,
       coalesce(b._loader_live, false) AS _loader_had_row
FROM latest l
LEFT JOIN matched b ON ${key_join}
