-- What the merge does to each changed key, counted: an insert of a new key, an update of a
-- key the table has, a delete of one; stale changes (older than the table's row) do nothing.

WITH ${latest_changes}
SELECT
    sum(CASE WHEN l.op = 'I' AND b._seqno IS NULL THEN 1 ELSE 0 END) AS inserted,
    sum(CASE WHEN l.op = 'I' AND b._seqno <= l.seqno THEN 1 ELSE 0 END) AS updated,
    sum(CASE WHEN l.op = 'D' AND b._seqno <= l.seqno THEN 1 ELSE 0 END) AS deleted
FROM base b
RIGHT JOIN latest l ON ${key_join}
