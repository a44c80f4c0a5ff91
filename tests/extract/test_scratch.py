"""Scratch folders: removed after their step, and a killed step's removed by the next one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from loader.extract import scratch


def test_a_killed_steps_scratch_folder_is_removed_by_the_next_step(tmp_path: Path) -> None:
    # A step killed mid-way leaves its folder (the process is gone, nothing removed it).
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; from loader.extract import scratch; "
            "f = scratch.folder('extract', sys.argv[1]); p = f.__enter__(); "
            "open(os.path.join(p, 'part-00000.csv'), 'w').write('x'); print(p); os._exit(9)",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    left = Path(killed.stdout.strip())
    assert left.is_dir() and (left / "part-00000.csv").exists()
    with scratch.folder("extract", str(tmp_path)) as mine:
        assert not left.exists()  # the next step removed it
        assert Path(mine).name.startswith(f"loader-extract-{os.getpid()}-")
        # A live process's folder (this one's) and other folders are left alone.
        with scratch.folder("job", str(tmp_path)) as nested:
            assert Path(mine).is_dir() and Path(nested).is_dir()
        (tmp_path / "loader-notes").mkdir()
        assert scratch.remove_leftovers(str(tmp_path)) == []
    assert not Path(mine).exists() and (tmp_path / "loader-notes").is_dir()
