"""``plain_table`` draws exactly what Rich prints for the same table on a console without
colours, and declines (None) wherever it could not."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from freehours.cli.tables import Column, plain_console, plain_table, plain_text, rich_table

#: Text as ``nem12 inspect`` makes it: words and figures, spaces only between them.
WORDS = st.from_regex(r"([a-zA-Z0-9,.\-_/]{1,6}( [a-zA-Z0-9,.\-_/]{1,6}){0,2})?", fullmatch=True)
COLUMN = st.builds(
    Column,
    header=WORDS.filter(bool),
    justify=st.sampled_from(["left", "right"]),
    min_width=st.one_of(st.none(), st.integers(0, 12)),
    no_wrap=st.booleans(),
)


def printed_by_rich(title: str, columns: list[Column], rows: list[list[str]], width: int) -> str:
    console = Console(file=io.StringIO(), width=width)
    assert plain_console(console)
    console.print(rich_table(title, columns, rows))
    return console.file.getvalue()  # type: ignore[attr-defined]


@given(
    title=WORDS,
    columns=st.lists(COLUMN, min_size=1, max_size=5),
    data=st.data(),
    width=st.integers(20, 160),
)
def test_what_it_draws_is_what_rich_prints(
    title: str, columns: list[Column], data: st.DataObject, width: int
) -> None:
    rows = data.draw(
        st.lists(st.lists(WORDS, min_size=len(columns), max_size=len(columns)), max_size=6)
    )
    drawn = plain_table(title, columns, rows, width=width)
    if drawn is not None:
        assert drawn == printed_by_rich(title, columns, rows, width)


def test_a_summary_like_table_is_drawn_not_declined() -> None:
    columns = [Column("NMI", min_width=3, no_wrap=True), Column("total", "right", no_wrap=True)]
    rows = [[f"41000000{n:02d}", f"{n * 1.5:,.3f}"] for n in range(50)]
    drawn = plain_table("bench-out/file.csv", columns, rows, width=160)
    assert drawn is not None
    assert drawn == printed_by_rich("bench-out/file.csv", columns, rows, 160)


def test_what_rich_would_fold_or_read_is_declined() -> None:
    columns = [Column("a"), Column("b")]
    assert plain_table("t", columns, [["x" * 30, "y"]], width=20) is None  # folded
    assert plain_table("a title wider than it", columns, [["x", "y"]], width=80) is None
    assert plain_table("t", columns, [["[bold]x", "y"]], width=80) is None  # markup
    assert plain_table("t", columns, [[":smile:", "y"]], width=80) is None  # an emoji code
    assert plain_table("t", columns, [["é", "y"]], width=80) is None
    assert plain_table("", columns, [["x", "y"]], width=80) is None  # no title line


def test_a_console_with_colours_or_without_utf8_is_not_plain() -> None:
    assert not plain_console(
        Console(file=io.StringIO(), force_terminal=True, color_system="standard")
    )
    assert not plain_console(Console(file=io.TextIOWrapper(io.BytesIO(), encoding="ascii")))


@given(
    words=st.lists(WORDS.filter(bool), min_size=1, max_size=30),
    separator=st.sampled_from([" ", "; ", ", ", "  "]),
    width=st.integers(20, 160),
)
def test_a_line_of_text_is_wrapped_as_rich_wraps_it(
    words: list[str], separator: str, width: int
) -> None:
    text = separator.join(words)
    console = Console(file=io.StringIO(), width=width)
    console.print(text, highlight=False)
    assert plain_text(text, width=width) == console.file.getvalue()  # type: ignore[attr-defined]


def test_a_word_longer_than_a_line_is_left_to_rich() -> None:
    assert plain_text("a " + "b" * 30, width=20) is None
    assert plain_text("a [bold]b[/]", width=20) is None  # markup
