"""The supervisor's restart rule, on its own: a process that served a while is replaced at once;
quick deaths in a row wait ever longer, then it gives up (the processes: test_serve_processes)."""

from __future__ import annotations

from freehours.api.supervisor import MAX_QUICK_DEATHS, QUICK_SECONDS, Slot


def test_a_process_that_served_a_while_is_replaced_at_once_and_resets_the_count() -> None:
    slot = Slot(started=100.0, quick_deaths=3)
    assert slot.died(100.0 + QUICK_SECONDS) == 100.0 + QUICK_SECONDS
    assert slot.quick_deaths == 0


def test_quick_deaths_in_a_row_wait_twice_as_long_each_time_then_it_gives_up() -> None:
    slot = Slot()
    waits = []
    for n in range(MAX_QUICK_DEATHS):
        slot.started = 1000.0 * n
        restart = slot.died(1000.0 * n + 1)
        waits.append(None if restart is None else restart - (1000.0 * n + 1))
    assert waits == [0.5, 1.0, 2.0, 4.0, None]
    assert slot.quick_deaths == MAX_QUICK_DEATHS
