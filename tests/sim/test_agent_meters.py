"""Simulated meters for the agent: every interval read once, as it ends, the same for a seed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal

from freehours.agent.batch import Batch
from freehours.domain.time import NEM_TIME
from freehours.sim.agent_meters import SimulatedMeters

START = datetime(2026, 7, 1, 0, 0, tzinfo=NEM_TIME)


def reads_of(batches: list[Batch]) -> dict[tuple[str, str, str], Decimal]:
    """(nmi, suffix, start) -> kWh, over every batch."""
    found: dict[tuple[str, str, str], Decimal] = {}
    for batch in batches:
        body = json.loads(batch.body)
        for read in body["reads"]:
            key = (body["nmi"], body["suffix"], read["start"])
            assert key not in found
            found[key] = Decimal(read["kwh"])
    return found


def polled(meters: SimulatedMeters, every: timedelta) -> list[Batch]:
    """Every batch ``meters`` make, asked for what is due every ``every`` from ``START`` until
    they are finished, in the order they came."""
    batches: list[Batch] = []
    moment = START
    while not meters.finished:
        moment += every
        batches.extend(meters.due(moment))
    return batches


def test_nothing_is_read_before_the_first_interval_ends() -> None:
    meters = SimulatedMeters(2, 1, START, START + timedelta(hours=2))
    assert meters.due(START + timedelta(minutes=29)) == []
    assert meters.next_end == START + timedelta(minutes=30)


def test_each_ended_interval_is_one_read_per_meter_and_channel() -> None:
    meters = SimulatedMeters(3, 1, START, START + timedelta(hours=2))
    batches = meters.due(START + timedelta(minutes=30))
    assert [(json.loads(b.body)["nmi"], json.loads(b.body)["suffix"]) for b in batches] == [
        ("4100000001", "E1"),
        ("4100000001", "B1"),
        ("4100000002", "E1"),
        ("4100000002", "B1"),
        ("4100000003", "E1"),
        ("4100000003", "B1"),
    ]
    assert all(batch.reads == 1 for batch in batches)
    (read,) = json.loads(batches[0].body)["reads"]
    assert read["start"] == "2026-07-01T00:00:00+10:00"
    assert read["quality"] == "A"


def test_intervals_that_ended_while_nobody_looked_come_one_batch_each_in_time_order() -> None:
    meters = SimulatedMeters(1, 1, START, START + timedelta(hours=2))
    batches = meters.due(START + timedelta(hours=1, minutes=40))
    assert [batch.reads for batch in batches] == [1] * 6
    bodies = [json.loads(batch.body) for batch in batches]
    assert [(body["suffix"], body["reads"][0]["start"][11:16]) for body in bodies] == [
        ("E1", "00:00"),
        ("B1", "00:00"),
        ("E1", "00:30"),
        ("B1", "00:30"),
        ("E1", "01:00"),
        ("B1", "01:00"),
    ]


def test_the_batches_and_their_keys_do_not_depend_on_when_the_agent_looks() -> None:
    end = START + timedelta(hours=5)
    all_at_once = SimulatedMeters(2, 5, START, end).due(end)
    batches = polled(SimulatedMeters(2, 5, START, end), timedelta(minutes=47))
    assert [b.idempotency_key for b in batches] == [b.idempotency_key for b in all_at_once]


def test_every_interval_up_to_the_end_is_read_exactly_once_however_it_is_polled() -> None:
    end = START + timedelta(hours=26)
    all_at_once = reads_of(SimulatedMeters(2, 5, START, end).due(end + timedelta(days=1)))
    assert reads_of(polled(SimulatedMeters(2, 5, START, end), timedelta(minutes=7))) == all_at_once
    assert len(all_at_once) == 2 * 2 * 52  # meters x channels x half-hours in 26 hours


def test_the_same_seed_gives_the_same_reads_whatever_the_start() -> None:
    end = START + timedelta(hours=6)
    whole = reads_of(SimulatedMeters(2, 9, START, end).due(end))
    later = reads_of(SimulatedMeters(2, 9, START + timedelta(hours=3), end).due(end))
    assert later.items() <= whole.items()
    assert len(later) == 2 * 2 * 6
    other_seed = reads_of(SimulatedMeters(2, 10, START, end).due(end))
    assert other_seed != whole


def test_a_start_between_intervals_reads_the_interval_it_falls_in() -> None:
    meters = SimulatedMeters(1, 1, START + timedelta(minutes=10), START + timedelta(hours=1))
    assert meters.next_end == START + timedelta(minutes=30)


def test_export_and_consumption_are_never_both_positive() -> None:
    end = START + timedelta(days=1)
    reads = reads_of(SimulatedMeters(4, 3, START, end).due(end))
    for (nmi, suffix, start), kwh in reads.items():
        if suffix == "E1" and kwh > 0:
            assert reads[nmi, "B1", start] == 0
