"""Scratch folders of a step (decoded parts before upload, a Spark job's outcome), named with
the process id so that the next step removes what a killed one left behind."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from loader.state.processes import alive

_NAME = re.compile(r"^loader-[a-z]+-(\d+)-")


def remove_leftovers(root: str | None = None) -> list[Path]:
    """Remove the scratch folders of processes that are gone (killed mid-step); returns them."""
    base = Path(root or tempfile.gettempdir())
    removed = []
    for path in base.glob("loader-*-*-*"):
        m = _NAME.match(path.name)
        if m and path.is_dir() and not alive(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


@contextmanager
def folder(kind: str, root: str | None = None) -> Iterator[str]:
    """A scratch folder for this process's step ``kind``, removed after it (and the leftovers of
    killed steps removed before it)."""
    remove_leftovers(root)
    path = tempfile.mkdtemp(prefix=f"loader-{kind}-{os.getpid()}-", dir=root)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
