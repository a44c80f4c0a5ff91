-- The history mode (loader.core.modes): what the staged changes do to a table of versions.
--
--   changes : the staged change rows, typed (as ranked_changes.sql takes them)
--   target  : the table's rows (of it, only each changed key's version columns are read)
--
-- A transaction is one step of a key: its last change there (the greatest row_id). A key's
-- steps the table has already taken (at or before the newest seqno its versions were opened or
-- closed at: a replay, or the copy of a re-load) are left out. Of the others, in seqno order:
--   close : the first, when the key has a current version: that version ends there
--   open  : each insert opens a version, valid until the key's next step (current if none);
--           _loader_prev_op is the op of the key's step before it (NULL: the table's current
--           version tells whether the key had a row)

WITH steps AS (
    SELECT * FROM (
        SELECT c.*,
               row_number() OVER (PARTITION BY ${change_key}, c._loader_seqno ORDER BY c._loader_row_id DESC) AS _loader_last
        FROM changes c
    ) WHERE _loader_last = 1
),
applied AS (
    SELECT ${target_key},
           max(greatest(t._valid_from_seqno, coalesce(t._valid_to_seqno, t._valid_from_seqno))) AS _loader_applied,
           max(CASE WHEN t._is_current THEN t._valid_from_seqno END) AS _loader_current
    FROM ${target} t
    LEFT SEMI JOIN steps s ON ${target_join}
    GROUP BY ${target_key}
),
fresh AS (
    SELECT s.*, a._loader_current
    FROM steps s
    LEFT JOIN applied a ON ${applied_join}
    WHERE s._loader_seqno > coalesce(a._loader_applied, -1)
),
stepped AS (
    SELECT f.*,
           lag(f._loader_op) OVER w AS _loader_prev_op,
           lead(f._loader_seqno) OVER w AS _loader_next_seqno,
           lead(f._loader_commit_ts) OVER w AS _loader_next_commit_ts
    FROM fresh f
    WINDOW w AS (PARTITION BY ${fresh_key} ORDER BY f._loader_seqno)
)
SELECT s.*, 'close' AS _loader_action FROM stepped s
WHERE s._loader_prev_op IS NULL AND s._loader_current IS NOT NULL
UNION ALL
SELECT s.*, 'open' AS _loader_action FROM stepped s
WHERE s._loader_op = 'I'
