"""Several sources at once: the change rows per second of 1, 2 and 4 sources run together on this
machine, against one source alone.

One private MariaDB server (binlog on) per source, each with ``bench.t`` of ``--rows`` rows (the
table and the workload of ``bench/delta_cycle.py``), and one deployment over them: ``loader.toml``
(``[sources] dir``, the shared staging, warehouse and Spark settings; Iceberg, the default) and a
source file per server. Every source is loaded first (not timed). Then for each round of ``k``
sources (``--rounds``, 1, 2 and 4): ``--changes`` row changes on each of the first ``k`` servers,
then ``loader run-once --source <name>`` of those ``k`` sources started at the same moment, each a
process of its own as Airflow's workers would run them, timed with the wall clock from the first
start to the last end. The round's rate is the change rows its runs extracted (an update is two)
over that time; the ratio is to the one-source round's rate. The machine's CPU, busy share of all
its cores over the round (``/proc/stat``), says whether the CPU is the limit.

After each round ``loader checksum --source <name>`` (not timed) must find each run source's table
equal to its server, so a lost or doubled change cannot pass as fast.

    .venv/bin/python bench/sources.py [--rows 200000] [--changes 50000] [--rounds 1,2,4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.binlog_decode import start_server, stop_server  # noqa: E402
from bench.delta_cycle import PASSWORD_ENV, Finished, fill, loader, make_changes  # noqa: E402


def write_deployment(folder: Path, ports: list[int]) -> Path:
    """``folder/loader.toml`` and ``folder/sources/src_<i>.toml``, a source per server, each into
    its own warehouse database (the sources select the same ``bench.t``)."""
    sources = folder / "sources"
    sources.mkdir(parents=True)
    for i, port in enumerate(ports, 1):
        (sources / f"src_{i}.toml").write_text(
            f'[source]\nport = {port}\n[warehouse]\ndatabase = "bench_src_{i}_wh"\n', encoding="utf-8"
        )
    path = folder / "loader.toml"
    path.write_text(
        f"""[sources]
dir = "sources"
[source]
host = "127.0.0.1"
user = "loader"
password_env = "{PASSWORD_ENV}"
[tables]
include = ["bench.t"]
[staging]
uri = "staging"
[warehouse]
dir = "warehouse"
[spark]
master = "local[2]"
conf = {{ "spark.sql.shuffle.partitions" = "4" }}
""",
        encoding="utf-8",
    )
    return path


def cpu_times() -> tuple[int, int]:
    """All cores' busy and total jiffies so far (``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    total = sum(fields[:8])
    return total - idle, total


def round_of(config: Path, names: list[str], cwd: Path) -> tuple[float, int, float, list[Finished]]:
    """``run-once`` of these sources at once: the wall seconds from the first start to the last
    end, the change rows extracted, the CPU's busy share, and each run."""
    busy0, total0 = cpu_times()
    started = time.perf_counter()
    with ThreadPoolExecutor(len(names)) as pool:
        runs = list(
            pool.map(
                lambda name: loader("run-once", "--source", name, "--output", "json", config=config, cwd=cwd),
                names,
            )
        )
    seconds = time.perf_counter() - started
    busy1, total1 = cpu_times()
    changes = 0
    for run in runs:
        extracted = run.check().json().get("extracted") or {}
        changes += int(extracted.get("changes", 0))
    return seconds, changes, (busy1 - busy0) / max(1, total1 - total0), runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--changes", type=int, default=50_000, help="row changes per source and round")
    parser.add_argument("--rounds", default="1,2,4", help="how many sources run at once, per round")
    args = parser.parse_args()
    rounds = [int(k) for k in args.rounds.split(",")]
    folder = Path(tempfile.mkdtemp(prefix=f"bench-sources-{os.getpid()}-"))
    servers = [folder / f"mariadb-{i}" for i in range(1, max(rounds) + 1)]
    try:
        ports = [start_server(datadir) for datadir in servers]
        names = [f"src_{i}" for i in range(1, len(ports) + 1)]
        config = write_deployment(folder / "deploy", ports)
        t0 = time.perf_counter()
        for port in ports:
            fill(port, args.rows)
        for name in names:
            loader("initial-load", "--source", name, config=config, cwd=folder).check()
        print(
            f"{len(names)} sources of {args.rows:,} rows each, filled and loaded in "
            f"{time.perf_counter() - t0:.0f} s (not timed below)",
            flush=True,
        )
        print(f"{'sources':>7} {'change rows':>12} {'wall s':>7} {'rows/s':>9} {'ratio':>6} {'CPU busy':>8}")
        base = None
        for n, k in enumerate(rounds):
            for port in ports[:k]:  # new keys above the earlier rounds' (inserts are 30%)
                make_changes(port, args.rows, args.changes, first_new_key=args.rows + 1 + n * args.changes)
            seconds, changes, busy, _ = round_of(config, names[:k], folder)
            rate = changes / seconds
            base = base or rate
            print(
                f"{k:>7} {changes:>12,} {seconds:>7.1f} {rate:>9,.0f} {rate / base:>6.2f} {busy:>8.0%}",
                flush=True,
            )
            for name in names[:k]:
                checked = loader("checksum", "--source", name, config=config, cwd=folder)
                if checked.returncode != 0 or ", equal" not in checked.stdout:
                    raise RuntimeError(
                        f"{name}: the checksum after the round of {k}:\n{checked.stdout}{checked.stderr}"
                    )
        print(
            "ratio: the round's change rows per second over one source's; CPU busy: all cores' busy share "
            "during the round (near 100%: the CPU is the limit)"
        )
    except subprocess.CalledProcessError as exc:
        print(f"bench/sources.py: error: {exc}", file=sys.stderr)
        return 1
    finally:
        for datadir in servers:
            stop_server(datadir)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
