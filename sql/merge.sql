-- The merge rule (DESIGN.md section 4), for one table or one partition of it.
--
--   changes : the staged change rows, typed: op, seqno, row_id, commit_ts, <columns>
--   base    : the current rows: <columns>, _seqno, _commit_ts
--
-- 1. latest = per primary key, the change with the greatest (seqno, row_id);
-- 2. a base row whose _seqno is greater than its key's latest change stays (a stale replay);
-- 3. otherwise the key's base row goes, and the latest change is written when it is an insert;
-- 4. keys without changes stay as they are.
-- Applying the same changes again gives the same rows.

WITH ${latest_changes}
SELECT ${base_columns}, b._seqno, b._commit_ts
FROM base b
LEFT JOIN latest l ON ${key_join}
WHERE ${latest_key_is_null} OR b._seqno > l.seqno

UNION ALL

-- Written as base RIGHT JOIN latest (not latest LEFT JOIN base) so that the small side, the
-- changes, is the one Spark can broadcast.
SELECT ${latest_columns}, l.seqno AS _seqno, l.commit_ts AS _commit_ts
FROM base b
RIGHT JOIN latest l ON ${key_join}
WHERE l.op = 'I' AND (${base_key_is_null} OR b._seqno <= l.seqno)
