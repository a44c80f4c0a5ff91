"""Every error the loader raises on purpose, and how a caller decides whether to retry.

Each error class is either terminal ("do not retry, a person has to look": ``transient = False``)
or transient (may succeed on retry: ``TransientError`` and its subclasses). Callers decide with
``is_transient`` and ``exit_code``, never by reading an error's text. Each error keeps its fields
as attributes and stays picklable, so it crosses process boundaries (Spark executors, Airflow
task runners) intact.
"""

from __future__ import annotations

from loader.core.driver import pymysql

# Exit codes of the ``loader`` command and of the Spark jobs (``loader.app.spark_jobs``).
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_TRANSIENT = 0, 1, 2, 3

# Lost or refused connections and lock waits: worth a retry.
TRANSIENT_MYSQL_CODES = frozenset({1205, 1213, 2003, 2006, 2013})


class LoaderError(Exception):
    """Base class of every error the loader raises on purpose; terminal unless said otherwise."""

    transient: bool = False

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, self.args)


class TransientError(LoaderError):
    """A failure that may go away on retry (network, storage, a busy server)."""

    transient = True


# --- terminal: configuration and source ---------------------------------------------------


class ConfigError(LoaderError):
    """The configuration is missing, unreadable or holds a value that is not accepted."""


class SourceError(LoaderError):
    """The source server is misconfigured for binlog replication or refused a request."""


class TableKeyError(LoaderError):
    """A table has no key the loader can merge by."""


# --- terminal: reading the binlog ---------------------------------------------------------


class DecodeError(LoaderError):
    """A binlog event could not be decoded; carries where it happened."""

    def __init__(self, message: str, where: str = "", event_type: str = "") -> None:
        super().__init__(message, where, event_type)
        self.message = message
        self.where = where
        self.event_type = event_type

    def __str__(self) -> str:
        parts = [p for p in (self.where, self.event_type) if p]
        prefix = " ".join(parts)
        return f"{prefix}: {self.message}" if prefix else self.message


class HistoryError(LoaderError):
    """The source no longer holds the binlog history the ledger recorded (reset, restored, or
    another server behind the address): reading on would mix two histories."""


# What on-call does about a HistoryError.
HISTORY_REMEDY = (
    "Point the loader back at the server that holds that history, or re-load every table "
    "(loader initial-load) to start from this one"
)


class IncidentError(LoaderError):
    """The server wrote an incident event: it lost changes at this point of the log."""


class BodyError(ValueError):
    """Raised inside an event body decoder; the parser turns it into a ``DecodeError`` with the
    file position and event type, so it never leaves the binlog package."""


class JsonbError(ValueError):
    """The binary JSON is malformed; becomes a ``DecodeError`` like ``BodyError``."""


class GtidError(ValueError):
    """A GTID text that is not a MariaDB GTID position or a MySQL GTID set; the caller names
    the server or ledger record it came from."""


# --- terminal: staging and the ledger -----------------------------------------------------


class ExtractError(LoaderError):
    """The interval cannot be extracted as the binlog stands (a schema change, a missing key...)."""


class CsvValueError(LoaderError):
    """A value cannot be written to a staging file."""


class StoreError(LoaderError):
    """The store refused a request for a reason retrying will not fix."""


class ManifestError(LoaderError):
    """A manifest is missing fields or has a version this loader does not read."""


class LeaseError(TransientError):
    """Another run holds the source's lease (one step at a time per source): retry later."""


class LedgerError(LoaderError):
    """The ledger does not allow the step asked for (no checkpoint, a competing run, ...), or one
    of its records cannot be read."""


# --- terminal: the warehouse --------------------------------------------------------------


class TypeMapError(LoaderError):
    """A MySQL column type the warehouse has no mapping for."""


class MergeError(LoaderError):
    """The merge cannot be rendered for this table (no key, a key column it does not have)."""


class MaterializeError(LoaderError):
    """A table cannot be materialised (an interval out of order, a change the table cannot take)."""


class SnapshotError(LoaderError):
    """A warehouse table no longer keeps the state asked for (its snapshots were expired)."""


class CatalogError(LoaderError):
    """The Iceberg catalog cannot be used (its server down, a wrong password); transient when
    it could not be reached."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(message, transient)
        self.message = message
        self.transient = transient

    def __str__(self) -> str:
        return self.message


class LagError(LoaderError):
    """The warehouse is further behind its source than the alert threshold allows."""


class LoadError(LoaderError):
    """The initial load cannot go on (a table it cannot key, a subset on a first load, ...)."""


class SparkJobError(LoaderError):
    """A Spark job failed; carries the job's own error class and whether it is worth a retry."""

    def __init__(self, message: str, job: str = "", error_class: str = "", transient: bool = False) -> None:
        super().__init__(message, job, error_class, transient)
        self.message = message
        self.job = job
        self.error_class = error_class
        self.transient = transient

    def __str__(self) -> str:
        return self.message


# What a step reports in one line (``describe``) rather than as a traceback: the loader's own
# errors, the source server's, and failed file operations (a full or read-only disk).
REPORTED = (LoaderError, pymysql.err.Error, OSError)


def error_class(exc: BaseException) -> str:
    """The class of the error that stopped a step: a Spark job's own, for a job that failed."""
    return (exc.error_class if isinstance(exc, SparkJobError) else "") or type(exc).__name__


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the step that raised ``exc`` may succeed."""
    if isinstance(exc, LoaderError):
        return exc.transient
    if isinstance(exc, pymysql.err.Error):
        return bool(exc.args) and exc.args[0] in TRANSIENT_MYSQL_CODES
    # A network that failed or timed out; a full or read-only disk needs a person.
    return isinstance(exc, ConnectionError | TimeoutError)


def exit_code(exc: BaseException) -> int:
    """The exit code of a command or job that failed with ``exc``."""
    return EXIT_TRANSIENT if is_transient(exc) else EXIT_ERROR


def describe(exc: BaseException) -> str:
    """One line for a user: the loader's own text, a source server's message without its code,
    or the file and the cause of a failed file operation (a full or read-only disk)."""
    if isinstance(exc, pymysql.err.Error) and exc.args:
        return f"source error: {exc.args[-1]}"
    if isinstance(exc, OSError) and exc.strerror:
        where = f" {exc.filename}" if exc.filename is not None else ""
        return f"cannot write or read{where}: {exc.strerror}"
    return str(exc)
