"""Value readers: small pure functions over a row image.

Every reader has the form ``read(buf, off) -> (value, new_off)`` and is built once per column by
a factory that takes the column's metadata, so the row loop does no type dispatch. Layouts
mirror the server's ``sql/field.cc``, ``mysys/my_time.c``, ``strings/decimal.c`` and
``sql-common/json_binary.cc``; each module names the part it mirrors.
"""

from collections.abc import Callable
from typing import Any

Reader = Callable[[bytes, int], tuple[Any, int]]
