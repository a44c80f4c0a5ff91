"""What a statement logged as a query changes: the tables a DDL or a statement-logged DML names.

The binlog carries row changes as rows events; anything else that changes a table arrives as the
statement's text (DDL always, DML when a session logged it as STATEMENT or MIXED). The loader
cannot replay statements, so it must at least know which tables each one changes, in every
spelling the server accepts: quoted or bare names, ``schema.table`` or the statement's default
schema, lists (``DROP TABLE a, t``, ``RENAME TABLE a TO b, t TO t_old``), versioned comments
(``/*!40000 ... */``, MariaDB's ``/*M!100100 ... */``, which the server executes), and ordinary
comments (which it does not).

For a DML statement whose targets cannot be told apart from the tables it only reads (a
multi-table UPDATE or DELETE), every table it names counts as a target: stopping on a table that
was only read is safe, missing one that was written is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Name = tuple[str, str]  # (schema, table)


@dataclass(frozen=True)
class Change:
    """What one statement does to tables.

    Attributes:
        verb: the statement's kind, e.g. ``ALTER TABLE``, ``DROP TABLE``, ``INSERT``.
        dml: True for a row change logged as a statement (INSERT, UPDATE, LOAD DATA, ...).
        changed: tables whose rows or columns the statement changes (or may change).
        created: tables that exist under this name afterwards holding other rows than before
            (``CREATE TABLE``, the new name of a rename).
        replaced: created tables that may have existed before (``CREATE OR REPLACE``).
        dropped_schemas: schemas dropped with every table in them.
        added_with_values: columns an ALTER TABLE adds that existing rows hold a value for
            other than NULL (a default, an implicit NOT NULL default, a generated value), which
            no row event carries.
        reshaped: what an ALTER TABLE does to the columns the table has that a table with
            columns kept by name cannot follow: ``drops column c``, ``renames column a to b``,
            ``puts column c first``.
    """

    verb: str
    dml: bool = False
    changed: tuple[Name, ...] = ()
    created: tuple[Name, ...] = ()
    replaced: bool = False
    if_not_exists: bool = False  # CREATE TABLE IF NOT EXISTS: the table may have been there
    dropped_schemas: tuple[str, ...] = ()
    added_with_values: tuple[str, ...] = ()
    reshaped: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[Name, ...]:
        """Every table the statement changes or creates."""
        return self.changed + self.created


NONE = Change("")

# --- tokens -----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<versioned>/\*M?!\d*)            # executed by the server: read what is inside
    | (?P<comment>/\*.*?\*/|(?:--[ \t]|\#)[^\n]*)
    | (?P<close>\*/)                      # the end of a versioned comment
    | (?P<quoted>`(?:[^`]|``)*`)
    | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<word>[\w$]+)
    | (?P<punct>.)
    """,
    re.S | re.X,
)


@dataclass(frozen=True, slots=True)
class _Token:
    text: str  # an identifier's name (unquoted), a keyword upper-cased, or punctuation
    quoted: bool = False
    word: bool = False

    def kw(self, *words: str) -> bool:
        return self.word and not self.quoted and self.text.upper() in words


def _tokens(sql: str) -> list[_Token]:
    out: list[_Token] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        text = m.group()
        if kind in ("ws", "comment", "versioned", "close", "string"):
            continue
        if kind == "quoted":
            out.append(_Token(text[1:-1].replace("``", "`"), quoted=True, word=True))
        elif kind == "word":
            out.append(_Token(text, word=True))
        else:
            out.append(_Token(text))
    return out


class _Reader:
    def __init__(self, tokens: list[_Token], schema: str) -> None:
        self.t = tokens
        self.i = 0
        self.schema = schema

    def peek(self, *words: str) -> bool:
        return self.i < len(self.t) and self.t[self.i].kw(*words)

    def take(self, *words: str) -> bool:
        if self.peek(*words):
            self.i += 1
            return True
        return False

    def skip(self, *words: str) -> None:
        while self.take(*words):
            pass

    def punct(self, char: str) -> bool:
        if self.i < len(self.t) and not self.t[self.i].word and self.t[self.i].text == char:
            self.i += 1
            return True
        return False

    def name(self) -> Name | None:
        """``schema.table`` or ``table`` (in the default schema) at the current token."""
        if self.i >= len(self.t) or not self.t[self.i].word:
            return None
        first = self.t[self.i].text
        self.i += 1
        if self.i + 1 < len(self.t) and self.t[self.i].text == "." and self.t[self.i + 1].word:
            self.i += 2
            return first, self.t[self.i - 1].text
        return self.schema, first

    def names(self) -> list[Name]:
        """A comma-separated list of names."""
        out = []
        while (n := self.name()) is not None:
            out.append(n)
            if not self.punct(","):
                break
        return out

    def names_until(self, *stop: str) -> list[Name]:
        """Every name-like reference up to one of the ``stop`` keywords (or the end)."""
        out = []
        while self.i < len(self.t) and not self.peek(*stop):
            token = self.t[self.i]
            if token.word and (token.quoted or token.text.upper() not in _KEYWORDS):
                n = self.name()
                if n is not None:
                    out.append(n)
                    continue
            self.i += 1
        return out


# Words that read as names in the FROM part of an UPDATE or DELETE but are none.
_KEYWORDS = frozenset(
    [
        "AS",
        "CROSS",
        "DELAYED",
        "FORCE",
        "FROM",
        "HIGH_PRIORITY",
        "IGNORE",
        "INDEX",
        "INNER",
        "JOIN",
        "KEY",
        "LEFT",
        "LOW_PRIORITY",
        "NATURAL",
        "ON",
        "OUTER",
        "QUICK",
        "RIGHT",
        "STRAIGHT_JOIN",
        "USE",
        "USING",
        "AND",
        "OR",
        "NOT",
        "NULL",
        "IS",
        "IN",
        "LIKE",
        "BETWEEN",
        "TRUE",
        "FALSE",
    ]
)


# --- statements -------------------------------------------------------------------------------


def classify(sql: str, schema: str) -> Change:
    """What the statement ``sql``, run with the default schema ``schema``, does to tables."""
    r = _Reader(_tokens(sql), schema)
    if r.take("ALTER"):
        r.skip("ONLINE", "IGNORE")
        if not r.take("TABLE"):
            return NONE
        r.skip("IF")
        r.skip("EXISTS")
        target = r.name()
        if target is None:
            return NONE
        start = r.i
        renamed = _renamed_to(r)
        return Change(
            "ALTER TABLE",
            changed=(target,),
            created=(renamed,) if renamed else (),
            added_with_values=tuple(_added_with_values(r.t[start:])),
            reshaped=tuple(_reshaped(r.t[start:])),
        )
    if r.take("TRUNCATE"):
        r.take("TABLE")
        target = r.name()
        return Change("TRUNCATE TABLE", changed=(target,)) if target else NONE
    if r.take("DROP"):
        r.skip("TEMPORARY")
        if r.take("DATABASE", "SCHEMA"):
            r.skip("IF")
            r.skip("EXISTS")
            dropped = r.name()
            return Change("DROP DATABASE", dropped_schemas=(dropped[1],)) if dropped else NONE
        if not r.take("TABLE", "TABLES"):
            return NONE
        r.skip("IF")
        r.skip("EXISTS")
        return Change("DROP TABLE", changed=tuple(r.names()))
    if r.take("RENAME"):
        if not r.take("TABLE", "TABLES"):
            return NONE
        old, new = [], []
        while (a := r.name()) is not None:
            r.take("WAIT", "NOWAIT")  # RENAME TABLE t WAIT n TO ... (MariaDB)
            if r.i < len(r.t) and r.t[r.i].text.isdigit():
                r.i += 1
            if not r.take("TO"):
                break
            b = r.name()
            if b is None:
                break
            old.append(a)
            new.append(b)
            if not r.punct(","):
                break
        return Change("RENAME TABLE", changed=tuple(old), created=tuple(new))
    if r.take("CREATE"):
        replaced = r.take("OR") and r.take("REPLACE")
        r.skip("TEMPORARY")
        if not r.take("TABLE"):
            return NONE
        if_not_exists = r.take("IF")
        r.skip("NOT")
        r.skip("EXISTS")
        created = r.name()
        if created is None:
            return NONE
        return Change("CREATE TABLE", created=(created,), replaced=replaced, if_not_exists=if_not_exists)
    if r.take("INSERT", "REPLACE"):
        verb = r.t[r.i - 1].text.upper()
        r.skip("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE")
        r.take("INTO")
        target = r.name()
        return Change(verb, dml=True, changed=(target,) if target else ())
    if r.take("LOAD"):
        if not r.take("DATA", "XML"):
            return NONE
        while r.i < len(r.t) and not (r.take("INTO") and r.take("TABLE")):
            r.i += 1
        target = r.name()
        return Change("LOAD DATA", dml=True, changed=(target,) if target else ())
    if r.take("UPDATE"):
        return Change("UPDATE", dml=True, changed=tuple(r.names_until("SET")))
    if r.take("DELETE"):
        return Change(
            "DELETE", dml=True, changed=tuple(r.names_until("WHERE", "ORDER", "LIMIT", "RETURNING"))
        )
    if r.peek("WITH"):  # a common table expression before an UPDATE or DELETE: every name counts
        return Change("WITH", dml=True, changed=tuple(r.names_until()))
    return NONE


def _renamed_to(r: _Reader) -> Name | None:
    """The new name in an ALTER TABLE's ``RENAME [TO|AS] name`` clause, if it has one."""
    while r.i < len(r.t):
        if r.take("RENAME"):
            if r.peek("COLUMN", "INDEX", "KEY"):
                continue
            r.take("TO", "AS")
            return r.name()
        r.i += 1
    return None


# What a clause after ADD may add other than a column.
_NOT_COLUMNS = frozenset(
    [
        "INDEX",
        "KEY",
        "PRIMARY",
        "UNIQUE",
        "CONSTRAINT",
        "FOREIGN",
        "FULLTEXT",
        "SPATIAL",
        "PARTITION",
        "CHECK",
        "PERIOD",
        "SYSTEM",
    ]
)
# Column attributes that give existing rows a value: a default, a generated value, a counter.
_VALUED = frozenset(["AS", "GENERATED", "AUTO_INCREMENT", "SERIAL", "TIMESTAMP"])


def _added_with_values(tokens: list[_Token]) -> list[str]:
    """The columns added by an ALTER TABLE's clauses ``tokens`` that existing rows get a value
    for other than NULL. A column counts unless it provably defaults to NULL: nullable, with no
    default or ``DEFAULT NULL``, not generated, not a counter, not a TIMESTAMP (which servers
    may give an implicit default)."""
    out = []
    for clause in _top_level(tokens, ","):
        words = clause
        if not words or not words[0].kw("ADD"):
            continue
        rest = words[1:]
        if rest and rest[0].kw("COLUMN"):
            rest = rest[1:]
        while rest and rest[0].kw("IF", "NOT", "EXISTS"):
            rest = rest[1:]
        if not rest or rest[0].kw(*_NOT_COLUMNS):
            continue
        if rest[0].text == "(":  # ADD (c1 type, c2 type)
            inner = rest[1:-1] if rest[-1].text == ")" else rest[1:]
            definitions = _top_level(inner, ",")
        else:
            definitions = [rest]
        for definition in definitions:
            if definition and definition[0].word and _has_value(definition[1:]):
                out.append(definition[0].text)
    return out


# What a clause after DROP may drop other than a column.
_NOT_DROPPED_COLUMNS = _NOT_COLUMNS | {"DEFAULT"}


def _reshaped(tokens: list[_Token]) -> list[str]:
    """What an ALTER TABLE's clauses ``tokens`` do that keeps no column where it was by name and
    place: drop a column, rename one (``RENAME COLUMN``, ``CHANGE a b``), put one first. (A
    column put ``AFTER`` another may still end up last; the rows after the statement tell.)"""
    out = []
    for clause in _top_level(tokens, ","):
        if not clause or not clause[0].word:
            continue
        verb, rest = clause[0], clause[1:]
        if rest and rest[0].kw("COLUMN"):
            rest = rest[1:]
        while rest and rest[0].kw("IF", "NOT", "EXISTS"):
            rest = rest[1:]
        if not rest or not rest[0].word:
            continue
        first = len(rest) > 2 and rest[-1].kw("FIRST")
        if verb.kw("DROP") and not rest[0].kw(*_NOT_DROPPED_COLUMNS):
            out.append(f"drops column {rest[0].text}")
        elif verb.kw("RENAME") and clause[1].kw("COLUMN") and len(rest) >= 3 and rest[1].kw("TO"):
            out.append(f"renames column {rest[0].text} to {rest[2].text}")
        elif verb.kw("CHANGE") and len(rest) >= 2 and rest[1].word:
            if rest[0].text != rest[1].text:
                out.append(f"renames column {rest[0].text} to {rest[1].text}")
            if first:
                out.append(f"puts column {rest[1].text} first")
        elif verb.kw("MODIFY", "ADD") and first and not rest[0].kw(*_NOT_COLUMNS) and rest[0].text != "(":
            out.append(f"puts column {rest[0].text} first")
    return out


def _has_value(attributes: list[_Token]) -> bool:
    for i, t in enumerate(attributes):
        if t.kw(*_VALUED):
            return True
        if t.kw("NOT") and i + 1 < len(attributes) and attributes[i + 1].kw("NULL"):
            return True
        if t.kw("DEFAULT") and not (i + 1 < len(attributes) and attributes[i + 1].kw("NULL")):
            return True
    return False


def _top_level(tokens: list[_Token], separator: str) -> list[list[_Token]]:
    """``tokens`` split at ``separator`` outside parentheses."""
    parts: list[list[_Token]] = [[]]
    depth = 0
    for t in tokens:
        if not t.word and t.text == "(":
            depth += 1
        elif not t.word and t.text == ")":
            depth -= 1
        if depth == 0 and not t.word and t.text == separator:
            parts.append([])
        else:
            parts[-1].append(t)
    return [p for p in parts if p]
