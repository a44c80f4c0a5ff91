-- The latest change of each key: the greatest (seqno, row_id). Shared by merge.sql and
-- merge_counts.sql as their first common table expressions.
ranked AS (
    SELECT c.*,
           row_number() OVER (PARTITION BY ${key_columns} ORDER BY c.seqno DESC, c.row_id DESC) AS _rank
    FROM changes c
),
latest AS (
    SELECT * FROM ranked WHERE _rank = 1
)
