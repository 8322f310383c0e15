"""The NEM12 reader as it runs where its C part was not compiled."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from freehours.meterdata.nem12 import common


@contextmanager
def pure_python() -> Iterator[None]:
    """Within it, every row is read by ``common._read_row``: readers made inside use no C."""
    saved = common._Table
    common._Table = None
    try:
        yield
    finally:
        common._Table = saved
