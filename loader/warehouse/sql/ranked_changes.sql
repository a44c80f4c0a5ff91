-- Step 1 of the merge rule (DESIGN.md section 4), ranked: each change of a key numbered from its
-- latest, the one with the greatest (seqno, row_id), which gets _loader_rank 1.
--
--   changes : the staged change rows, typed: _loader_op, _loader_seqno, _loader_row_id,
--             _loader_commit_ts, <columns> (the meta columns named so that no source column
--             is named like one)

SELECT c.*,
       row_number() OVER (PARTITION BY ${key_columns} ORDER BY c._loader_seqno DESC, c._loader_row_id DESC) AS _loader_rank
FROM changes c
