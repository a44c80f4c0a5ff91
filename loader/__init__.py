"""Incremental batch warehouse loader: MySQL/MariaDB binlog -> staged CSV -> Spark warehouse."""

__version__ = "0.1.0"
