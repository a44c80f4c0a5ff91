-- Step 1 of the merge rule (DESIGN.md section 4): the latest change of each key, the one with
-- the greatest (seqno, row_id).
--
--   ranked : ranked_changes.sql over the staged change rows

SELECT * FROM (${ranked}) WHERE _loader_rank = 1
