"""``cyclic_gc_paused``: the collector off for a batch, its cycles freed after, and the
collector left as it was found."""

from __future__ import annotations

import gc
import weakref

import pytest

from freehours.cli.gcpause import cyclic_gc_paused


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture(autouse=True)
def collector_as_it_was() -> object:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def test_the_collector_is_off_inside_and_back_on_after_even_on_an_error() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), cyclic_gc_paused():  # noqa: PT012 - the point
        assert not gc.isenabled()
        raise RuntimeError("the batch fails")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()


def test_the_batch_cycles_are_freed_at_its_end_unless_told_not_to() -> None:
    gc.enable()
    with cyclic_gc_paused():
        freed = weakref.ref(Node())
    assert freed() is None
    gc.collect()  # the young count at nought: no automatic pass right after the batch
    with cyclic_gc_paused(collect=False):
        kept = weakref.ref(Node())
    assert kept() is not None  # until the collector next runs
    gc.collect()
    assert kept() is None
