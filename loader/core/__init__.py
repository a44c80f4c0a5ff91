"""What every stage agrees on, beneath all of them: the settings (``config``), the errors and
what each means for a retry (``errors``), binlog positions and sequence numbers (``positions``),
warehouse table names (``naming``), the table selection and keys (``tables``), the load modes
(``modes``), the typed records each step returns (``results``), the MySQL driver every connection
uses (``driver``), a double's text as each server writes it (``doubles``) and the crash points
the tests kill processes at (``crashpoints``). Takes nothing from the stages; each of them
reads it.
"""
