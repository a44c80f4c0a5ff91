-- Step 1 of the merge rule (DESIGN.md section 4), ranked: each change of a key numbered from its
-- latest, the one with the greatest (seqno, row_id), which gets _loader_rank 1; and what these
-- changes say of the key before the change's transaction: _loader_prev_op, the op of its latest
-- change in an earlier transaction (I: it had a row, D: it had none; NULL: the table's row tells).
--
--   changes : the staged change rows, typed: _loader_op, _loader_seqno, _loader_row_id,
--             _loader_commit_ts, _loader_interval, <columns> (the meta columns named so that no
--             source column is named like one)

SELECT c.*,
       row_number() OVER (PARTITION BY ${key_columns} ORDER BY c._loader_seqno DESC, c._loader_row_id DESC) AS _loader_rank,
       max(named_struct('seqno', c._loader_seqno, 'row_id', c._loader_row_id, 'op', c._loader_op)) OVER (
           PARTITION BY ${key_columns} ORDER BY c._loader_seqno DESC
           RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
       ).op AS _loader_prev_op
FROM changes c
