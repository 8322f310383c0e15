"""Python's cyclic garbage collector paused for a batch of work: bill runs and NEM12 imports."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused(*, collect: bool = True) -> Iterator[None]:
    """Python's cyclic garbage collector off for one batch of work (a bill run, a NEM12 file
    imported), then one pass over what the batch left young, and the collector back on.

    A batch frees what it makes by reference counting as it goes, or keeps it to its end, and
    makes few reference cycles. The collector cannot know that: it walks the young objects every
    few hundred allocations and, now and then, every object of the process, imports included.
    Measured: a bill run's reader file, 0.17 s of the collector in a 2.6 s run; an import of 50
    of the day bench's files, 1.16 s of 8.5 s. With ``collect``, a pass at the end frees the
    batch's cycles (the objects made while the collector was off are all still young), so a
    command of many batches does not grow with them; a command of one batch, whose process ends
    with it, need not walk what it kept. Back on afterwards, as commands also run inside other
    processes (tests).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collect:
            gc.collect(0)
        if enabled:
            gc.enable()
