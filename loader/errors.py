"""Every error the loader raises on purpose.

Terminal errors mean "do not retry, a person has to look"; transient ones may succeed on retry.
Each error keeps its fields as attributes and stays picklable, so it crosses process boundaries
(Spark executors, Airflow task runners) intact.
"""

from __future__ import annotations


class LoaderError(Exception):
    """Base class of every error the loader raises on purpose."""

    transient: bool = False

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, self.args)


class TransientError(LoaderError):
    """A failure that may go away on retry (network, storage, a busy server)."""

    transient = True


class ConfigError(LoaderError):
    """The configuration is missing, unreadable or holds a value that is not accepted."""


class SourceError(LoaderError):
    """The source server is misconfigured for binlog replication or refused a request."""


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


class BinlogResetError(LoaderError):
    """The binlog no longer continues the checkpoint; a new initial load is needed."""
