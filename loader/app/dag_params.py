"""The Params of the loader's DAGs: the fields of their trigger forms, with their titles and help.

The DAG files use them, and so does the on-call page (``loader.oncall``), whose ways out fill the
same fields: one place for what each field is called and means."""

from __future__ import annotations

from airflow.sdk import Param


def delta_params() -> dict[str, Param]:
    """The continuous-delta DAG's: a backfill start, a bound, the checksum, a dry run, an abandon."""
    return {
        "start_lognum": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Backfill from binlog file number",
            description="Replay from this binlog file (the number in mysql-bin.000042) to the present end. "
            "Give it with the position below; leave both empty to continue from the last interval.",
            section="Backfill",
        ),
        "start_logpos": Param(
            None,
            type=["null", "integer"],
            minimum=4,
            title="Backfill from byte position",
            description="The position in that file where a transaction starts (as SHOW BINLOG EVENTS "
            "or loader binlog show prints it).",
            section="Backfill",
        ),
        "allow_gap": Param(
            False,
            type="boolean",
            title="Allow a gap",
            description="Let the backfill start past where the log has been read: the changes in between "
            "are skipped for good and the gap is recorded in the ledger (loader status shows it). "
            "Without it such a start is refused.",
            section="Backfill",
        ),
        "max_changes": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Most changes per interval",
            description="End the interval at the first transaction boundary past this many row changes; "
            "the rest is left for the next run. Empty: no bound.",
        ),
        "checksum": Param(
            False,
            type="boolean",
            title="Checksum",
            description="After materialising, compare row counts and checksums per key range with the "
            "source at one snapshot of it (the warehouse is brought there first). The run fails, naming "
            "the tables and key ranges, if any differ. Reads every selected table on both sides.",
        ),
        "dry_run": Param(
            False,
            type="boolean",
            title="Dry run",
            description="Plan the interval and report it without extracting or writing anything.",
        ),
        "abandon_interval": Param(
            None,
            type=["null", "string"],
            title="Abandon interval",
            description="Before planning, give up this interval (its id, as loader intervals and loader "
            "status show it) and the later ones not materialised: they are never materialised, and this "
            "run plans again from before them. The way out of an interval that cannot be extracted.",
            section="Way out",
        ),
        "abandon_reason": Param(
            None,
            type=["null", "string"],
            title="Reason",
            description="Why the interval is abandoned; kept in the ledger. Required with Abandon interval.",
            section="Way out",
        ),
    }


def initial_load_params(modes: str) -> dict[str, Param]:
    """The initial-load DAG's: the tables to (re-)load, a start from now, key ranges per table; ``modes`` the source's warehouse modes (``DagSource.modes``)."""
    return {
        "tables": Param(
            [],
            type="array",
            items={"type": "string", "pattern": r"^[^.]+\.[^.]+$"},
            title="Tables",
            description="schema.table names to re-load while deltas keep running. Empty: every table "
            "the config selects (the first load must copy them all). A re-load keeps what a soft_delete "
            f"or history table knew. {modes}",
        ),
        "from_now": Param(
            False,
            type="boolean",
            title="Start from now",
            description="For a source whose binlog keeps less than a whole load takes: start the delta "
            "DAG at the source's current position with no copy, then fill the tables one by one with "
            "re-loads (Tables) while the deltas run. Only for a source never loaded; Tables stays empty.",
        ),
        "parallelism": Param(
            4,
            type="integer",
            minimum=1,
            maximum=64,
            title="Key ranges per table",
            description="How many key ranges of a table are read at once (source connections and Spark tasks).",
        ),
    }


def rollback_params() -> dict[str, Param]:
    """The rollback DAG's: the interval to return to."""
    return {
        "to_interval": Param(
            "",
            type="string",
            pattern=r"^[0-9]+$",
            title="Roll back to interval",
            description="A materialised interval (loader intervals lists them). Every warehouse table "
            "returns to its snapshot after it and the checkpoint to its end; the later intervals are "
            "applied again by the next delta run. Refused, with nothing changed, when a load came "
            "after it or its snapshots were expired.",
        ),
    }
