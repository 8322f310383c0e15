"""The NEM12 reader's C part (``freehours/meterdata/nem12/_rows.c``): ``Table().read`` answers as
its pure-Python twin ``common._read_row`` does, on any text (property-tested, the table kept
across examples so that its kept texts, its emptying and its probes all come into play); its
bounds hold (texts kept, their length, the slots a look-up probes); and the reader reads every
example file to the same days, statistics and errors with and without it."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import NEM12Reader, common
from tests.meterdata.nem12_text import channel, day, nem12
from tests.meterdata.pure import pure_python

SOURCE = Path(common.__file__).with_name("_rows.c")


class Refused(Exception):
    """What the test's look-up raises for a text with an x in it, as ``_Values`` raises
    ``_BadValue`` for a text that is not a value."""


class Lookup:
    """A look-up as the reader's: the same answer for the same text every time, None for an
    empty one, an exception for some; every text it is asked for noted."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, text: str) -> Decimal | None:
        self.asked.append(text)
        if not text:
            return None
        if "x" in text:
            raise Refused(text)
        return Decimal(len(text)) + Decimal(sum(map(ord, text))).scaleb(-6)


def answer(read: object, rest: str, count: int, lookup: Lookup) -> object:
    """What ``read(rest, count, lookup)`` returns, or the exception it raises, as a value."""
    try:
        return read(rest, count, lookup)  # type: ignore[operator]
    except Refused as exc:
        return ("refused", exc.args)


texts = st.one_of(
    st.sampled_from(["", "0.5", "1.25", "0", "10.000", "x", "A", "0.5x", "é9", "€1", "1€"]),
    st.text(alphabet="0123456789.xé€", max_size=20),  # some past the 16 bytes a key holds
)


@pytest.fixture(scope="module")
def tables(compiled_rows: ModuleType) -> list[object]:
    """Kept across the examples: the small one empties itself often."""
    return [compiled_rows.Table(), compiled_rows.Table(capacity=16)]


@given(fields=st.lists(texts, max_size=30), more=st.integers(-3, 3), which=st.integers(0, 1))
def test_the_table_reads_as_the_python_twin(
    tables: list[object], fields: list[str], more: int, which: int
) -> None:
    rest = ",".join(fields)
    count = max(0, len(fields) - 1 + more)  # fewer commas than, as many as, more than asked
    ours, twin = Lookup(), Lookup()
    table = tables[which]
    assert answer(table.read, rest, count, ours) == answer(common._read_row, rest, count, twin)  # type: ignore[attr-defined]
    # Kept texts spare the look-up; an empty one is never kept, so missing values are counted
    # alike; nothing is looked up that the twin does not look up.
    assert set(ours.asked) <= set(twin.asked)
    assert ours.asked.count("") == twin.asked.count("")


def test_a_table_keeps_at_most_half_its_capacity(compiled_rows: ModuleType) -> None:
    table = compiled_rows.Table(capacity=16)
    lookup = Lookup()
    for number in range(200):
        text = f"{number}.5"
        assert table.read(f"{text},A", 1, lookup) == ((lookup(text),), len(text) + 1)
        assert 1 <= table.kept() <= 8
    assert table.capacity() == 16
    table.clear()
    assert table.kept() == 0


def test_a_text_longer_than_a_key_is_looked_up_every_time(compiled_rows: ModuleType) -> None:
    table = compiled_rows.Table()
    long, short = "1" * compiled_rows.KEY_MAX + ".5", "1" * (compiled_rows.KEY_MAX - 2) + ".5"
    lookup = Lookup()
    for _ in range(3):
        table.read(f"{long},{short},A", 2, lookup)
    assert lookup.asked == [long, short, long, long]
    assert table.kept() == 1


def home(text: str, capacity: int) -> int:
    """The slot _rows.c's hash_key gives ``text`` first (little-endian machines)."""
    data, mask = text.encode("latin-1"), (1 << 64) - 1
    low = int.from_bytes(data[:8], "little")
    high = int.from_bytes(data[8:16], "little")
    value = ((low ^ (high * 0x9E3779B97F4A7C15 & mask) ^ len(data)) * 0xFF51AFD7ED558CCD) & mask
    return (value ^ (value >> 29)) & (capacity - 1)


@pytest.mark.skipif(sys.byteorder != "little", reason="the hash reads the bytes little-endian")
def test_texts_that_collide_cost_a_lookup_not_a_longer_search(compiled_rows: ModuleType) -> None:
    """Twenty texts with one home slot: the first MAX_PROBES are kept in the slots from it; each
    of the others, finding no room within MAX_PROBES, goes to the look-up every time (a dict
    that hashes with a key of its own), never to a longer search."""
    capacity, probes = 64, compiled_rows.MAX_PROBES
    assert probes == 8  # the bound _rows.c states: a look-up's cost, whatever the texts
    colliding = [text for number in range(5000) if home(text := f"{number}.5", capacity) == 7]
    colliding = colliding[:20]
    table = compiled_rows.Table(capacity=capacity)
    rest = ",".join([*colliding, "A"])
    first = Lookup()
    assert table.read(rest, 20, first) == (tuple(map(Lookup(), colliding)), len(rest) - 1)
    assert first.asked == colliding
    assert table.kept() == probes
    again = Lookup()
    table.read(rest, 20, again)
    assert again.asked == colliding[probes:]


@pytest.mark.skipif(sys.byteorder != "little", reason="the hash reads the bytes little-endian")
def test_a_text_is_found_only_whole(compiled_rows: ModuleType) -> None:
    """A kept text that a shorter one begins, in the shorter one's home slot, is not its
    value."""
    short = next(text for n in range(1000) if home(text := f"{n}.5", 16) == home(text + "5", 16))
    table, lookup = compiled_rows.Table(capacity=16), Lookup()
    table.read(f"{short}5,A", 1, lookup)
    assert table.read(f"{short},A", 1, lookup) == ((lookup(short),), len(short) + 1)
    assert lookup.asked == [f"{short}5", short, short]


def test_a_table_refuses_a_capacity_that_is_not_a_power_of_two(compiled_rows: ModuleType) -> None:
    for capacity in (0, 8, 17, 1 << 25):
        with pytest.raises(ValueError, match="a power of two"):
            compiled_rows.Table(capacity=capacity)
    with pytest.raises(TypeError):
        compiled_rows.Table().read(b"1,2", 1, Lookup())


def test_the_c_source_compiles_without_a_warning(compiled_rows: ModuleType) -> None:
    """-Wall -Wextra -Werror, as strict as the compiler goes without noise."""
    done = subprocess.run(
        [
            sysconfig.get_config_var("CC").split()[0],
            "-Wall",
            "-Wextra",
            "-Werror",
            "-fsyntax-only",
            f"-I{sysconfig.get_paths()['include']}",
            str(SOURCE),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _read_whole(source: Path | bytes) -> object:
    """Every day of ``source`` with what each holds, and the statistics; or the error."""
    reader = NEM12Reader(source, name="file", future=True)
    try:
        days = [
            (day.key, day.values, day.qualities, day.update_datetime, day.stored_text(), day.line)
            for day in reader.days()
        ]
    except NEM12Error as exc:
        return str(exc)
    return days, reader.stats


def test_the_reader_reads_every_example_alike_with_and_without_it(
    compiled_rows: ModuleType, nem12_examples: Path
) -> None:
    files = sorted(path for path in nem12_examples.rglob("*") if path.is_file())
    files = [path for path in files if path.suffix in (".csv", ".zip")]
    made = [
        nem12(channel(), day(values=["0.5", "", "1E3", "00.5", *["0.25"] * 44], quality="S")),
        nem12(channel(), day(values=["0.5"] * 47 + ["0.5x"])),  # refused: IntervalValue48
        nem12(channel(), day(values=["0.5"] * 47)),  # refused: 47 values
        nem12(channel(), day(value="0.5", quality="N"), day("20260702", quality="V")),
    ]
    sources: list[Path | bytes] = [*files, *(text.encode() for text in made)]
    assert len(files) > 30
    compiled = [_read_whole(source) for source in sources]
    with pure_python():
        assert [_read_whole(source) for source in sources] == compiled
    assert sum(isinstance(result, str) for result in compiled) >= 10  # errors compared too


def test_the_reader_uses_it_where_it_was_built(compiled_rows: ModuleType) -> None:
    assert common._Values(0).read_row.__self__.__class__ is compiled_rows.Table  # type: ignore[attr-defined]
    with pure_python():
        assert common._Values(0).read_row is common._read_row
