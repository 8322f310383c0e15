"""The spool: durable, FIFO, a batch gone only once delivered or set aside."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from freehours.agent.batch import Batch, nem12_batch, readings_batch
from freehours.agent.spool import Spool, SpoolOwned
from freehours.domain.reads import IntervalRead
from freehours.domain.time import NEM_TIME
from freehours.errors import ConfigurationError

NOW = datetime(2026, 7, 1, 2, 0, tzinfo=UTC)


def batch(kwh: str) -> Batch:
    start = datetime(2026, 7, 1, 11, 0, tzinfo=NEM_TIME)
    end = start + timedelta(minutes=30)
    read = IntervalRead("4100000001", "E1", start, end, Decimal(kwh), "A")
    return readings_batch("4100000001", "E1", 30, [read])


@pytest.fixture
def spool(tmp_path: Path) -> Spool:
    return Spool.open(tmp_path / "spool.db")


def test_batches_come_out_in_the_order_they_went_in(spool: Spool) -> None:
    batches = [batch(f"0.{n}") for n in range(1, 6)]
    assert spool.add(batches, NOW) == 5
    out = []
    while (head := spool.head()) is not None:
        out.append(head.batch)
        spool.delete(head.seq)
    assert out == batches


def test_a_batch_stays_first_until_deleted(spool: Spool) -> None:
    spool.add([batch("0.1"), batch("0.2")], NOW)
    first = spool.head()
    assert first is not None
    spool.count_attempt(first.seq)
    again = spool.head()
    assert again is not None
    assert again.seq == first.seq
    assert again.attempts == 1


def test_the_same_batch_is_spooled_once(spool: Spool) -> None:
    assert spool.add([batch("0.1")], NOW) == 1
    assert spool.add([batch("0.1"), batch("0.2")], NOW) == 1
    assert spool.pending() == 2


def test_the_same_file_content_from_two_files_is_two_batches(spool: Spool, tmp_path: Path) -> None:
    assert spool.add([nem12_batch(tmp_path / "a", b"x"), nem12_batch(tmp_path / "b", b"x")], NOW)
    assert spool.pending() == 2


def test_spooled_batches_survive_closing_and_reopening(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    spooled = batch("0.1")
    first = Spool.open(path)
    first.add([spooled, batch("0.2")], NOW)
    first.close()
    again = Spool.open(path)
    head = again.head()
    assert head is not None
    assert head.batch == spooled
    assert again.pending() == 2


def test_what_one_connection_spools_the_other_sees(tmp_path: Path) -> None:
    producer = Spool.open(tmp_path / "spool.db")
    sender = Spool.open(tmp_path / "spool.db", durable=False)
    producer.add([batch("0.1")], NOW)
    head = sender.head()
    assert head is not None
    sender.delete(head.seq)
    assert producer.pending() == 0


def test_a_batch_set_aside_is_never_offered_again_but_kept(spool: Spool) -> None:
    spool.add([batch("0.1"), batch("0.2")], NOW)
    head = spool.head()
    assert head is not None
    spool.set_aside(head.seq, 422, '{"type": "invalid-input"}')
    following = spool.head()
    assert following is not None
    assert following.seq != head.seq
    (rejected,) = spool.rejected()
    assert (rejected.seq, rejected.status_code, rejected.problem) == (
        head.seq,
        422,
        '{"type": "invalid-input"}',
    )
    assert spool.pending() == 1


def test_sequence_numbers_are_never_reused(spool: Spool) -> None:
    spool.add([batch("0.1")], NOW)
    first = spool.head()
    assert first is not None
    spool.delete(first.seq)
    spool.add([batch("0.2")], NOW)
    second = spool.head()
    assert second is not None
    assert second.seq > first.seq


def test_a_spool_that_cannot_be_opened_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ConfigurationError, match=r"spool .*file/spool\.db"):
        Spool.open(tmp_path / "file" / "spool.db")


def test_a_spool_belongs_to_the_first_api_that_opens_it(tmp_path: Path) -> None:
    path = tmp_path / "spool.db"
    spool = Spool.open(path)
    assert spool.owner() is None
    owner = spool.claim(path, "http://a:8000/", "/srv/a", NOW)
    assert (owner.api_url, owner.inbox) == ("http://a:8000", "/srv/a")
    spool.add([batch("0.1"), batch("0.2")], NOW)
    head = spool.head()
    assert head is not None
    spool.set_aside(head.seq, None, "could not be sent: header ...")
    spool.close()

    again = Spool.open(path)
    assert again.claim(path, "http://a:8000", "/srv/elsewhere", NOW) == owner
    with pytest.raises(SpoolOwned) as refused:
        again.claim(path, "http://b:9000", "/srv/b", NOW)
    message = str(refused.value)
    assert f"spool {path} belongs to the API at http://a:8000 (inbox /srv/a," in message
    assert "1 batches wait in it to be sent there, 1 are set aside" in message
    assert "this agent is for http://b:9000" in message
    assert again.owner() == owner
    assert again.pending() == 1
