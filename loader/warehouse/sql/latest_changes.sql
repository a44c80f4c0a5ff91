-- Step 1 of the merge rule (DESIGN.md section 4): the latest change of each key, the one with
-- the greatest (seqno, row_id).
--
--   changes : the staged change rows, typed: op, seqno, row_id, commit_ts, <columns>

SELECT *
FROM (
    SELECT c.*,
           row_number() OVER (PARTITION BY ${key_columns} ORDER BY c.seqno DESC, c.row_id DESC) AS _rank
    FROM changes c
)
WHERE _rank = 1
