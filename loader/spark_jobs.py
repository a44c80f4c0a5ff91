"""The Spark job that materialises staged intervals: what ``spark-submit`` runs.

    spark-submit loader/materialize_job.py --config loader.toml

Prints one JSON line with a summary per table (the ``loader materialize`` command and the
Airflow task read it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence

from loader.config import load_config
from loader.errors import LoaderError

SUMMARY_PREFIX = "LOADER-MATERIALIZE-SUMMARY "


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="materialize_job")
    parser.add_argument("--config", help="TOML config file (default: $LOADER_CONFIG)")
    args = parser.parse_args(argv)
    from loader.materialize import run_materialize
    from loader.spark import build_session

    try:
        cfg = load_config(args.config)
        spark = build_session(cfg, app_name=f"loader-materialize-{cfg.source.name}")
        spark.sparkContext.setLogLevel("WARN")
        results = run_materialize(spark, cfg)
    except LoaderError as exc:
        print(f"materialize: error: {exc}", file=sys.stderr)
        return 1
    print(SUMMARY_PREFIX + json.dumps([dataclasses.asdict(r) for r in results]), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
