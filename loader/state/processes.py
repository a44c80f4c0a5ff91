"""Processes on this machine: whether one still runs (a killed step's leftovers and leases)."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: another user's counts, a zombie waiting to be reaped does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # there, but not ours to signal
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # gone meanwhile (the next look says so), or no /proc here
    return state != "Z"
