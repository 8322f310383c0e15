"""``freehours nem12 inspect`` and ``freehours demo`` on the command line."""

from __future__ import annotations

import io
import json
import sys
from datetime import date
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from freehours.cli import app, main
from freehours.cli.nem12 import _printed_plainly, print_summary, summarize
from freehours.errors import NEM12Error
from freehours.meterdata.nem12 import NEM12Reader
from freehours.settings import get_settings
from tests.meterdata.nem12_text import channel, day, nem12
from tests.support import run_flat

runner = CliRunner()

FILE = nem12(
    channel(nmi="NMI0000001", suffix="E1"),
    day("20260701", value="0.5", stamp="20260702010000"),
    day("20260701", value="0.25", stamp="20260703010000"),
    day("20260702", quality="V"),
    "400,1,46,A,,",
    "400,47,48,N,,",
    channel(nmi="NMI0000001", suffix="B1", uom="Wh", minutes=15),
    day("20260701", value="125", minutes=15),
    channel(nmi="NMI0000002", suffix="E1"),
    day("20260630", value="1", quality="S14"),
)


@pytest.fixture
def nem12_file(tmp_path: Path) -> Path:
    path = tmp_path / "meters.csv"
    path.write_text(FILE)
    return path


def test_inspect_prints_a_table_of_channels_and_a_summary(nem12_file: Path) -> None:
    result = runner.invoke(app, ["nem12", "inspect", str(nem12_file)])
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if "NMI000000" in line]
    assert len(rows) == 3
    assert "│ NMI0000001 │ E1 " in rows[1]
    assert "2026-07-01 │ 2026-07-02 │    2 │          1 │ A 94 N 2" in rows[1]
    assert "35.00 │" in rows[1]  # 48 x 0.25 and 46 x 0.5
    assert "│ 15 " in rows[0]
    summary = result.output.splitlines()[-1]
    assert summary.startswith(
        "2 NMIs; 3 channels; 2026-06-30 to 2026-07-02; 4 channel-days from 5 rows;"
    )
    assert "1 superseded by a later revision" in summary
    assert "2 missing" in summary


@pytest.mark.parametrize(("joined", "lines"), [(0, 1), (7, 2), (10**40, 2)])  # totals' lines
def test_inspect_into_a_pipe_prints_what_rich_prints_without_rich(
    nem12_file: Path, joined: int, lines: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Into a pipe or a file ``inspect`` prints its table and its line of totals without
    importing Rich (``_printed_plainly``): the same characters Rich prints there."""
    summary = summarize(NEM12Reader(nem12_file, future=True)) | {"joined_lines": joined}
    assert _printed_plainly(summary)
    plain = capsys.readouterr().out
    drawn = io.StringIO()
    print_summary(summary, Console(file=drawn, width=160))  # what summary_console() is there
    assert plain == drawn.getvalue()
    # The title, the header's three lines, a row a channel, the bottom, the totals' lines.
    assert len(plain.splitlines()) == 1 + 3 + 3 + 1 + lines


def test_inspect_into_a_terminal_is_left_to_rich(
    nem12_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = summarize(NEM12Reader(nem12_file, future=True))
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert not _printed_plainly(summary)
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert not _printed_plainly(summary)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    assert not _printed_plainly(summary | {"joined_lines": 10**200})  # a word past the width


def test_inspect_json_gives_the_same_as_data(nem12_file: Path) -> None:
    result = runner.invoke(app, ["nem12", "inspect", "--json", str(nem12_file)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["nmis"] == ["NMI0000001", "NMI0000002"]
    assert (summary["from"], summary["to"]) == ("2026-06-30", "2026-07-02")
    assert (summary["rows"], summary["days"], summary["superseded"]) == (5, 4, 1)
    assert summary["qualities"] == {"A": 190, "N": 2, "S": 48}
    assert summary["channels"][0] == {
        "nmi": "NMI0000001",
        "suffix": "B1",
        "units": ["KWH"],
        "interval_minutes": [15],
        "from": "2026-07-01",
        "to": "2026-07-01",
        "days": 1,
        "rows": 1,
        "superseded": 0,
        "intervals": 96,
        "missing": 0,
        "qualities": {"A": 96},
        "total": "12.000",
    }
    assert summary["channels"][1]["superseded"] == 1
    assert summary["channels"][1]["total"] == "35.00"


def test_a_bad_file_exits_2_naming_file_line_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(nem12(channel(), day(), "400,1,48,A,,"))
    monkeypatch.setattr("sys.argv", ["freehours", "nem12", "inspect", str(path)])
    with pytest.raises(SystemExit) as exited:
        main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"{path}:4: a 400 record must follow a 300 record whose QualityMethod is V" in err
    assert "(field RecordIndicator)" in err


def test_a_missing_file_is_bad_usage(tmp_path: Path) -> None:
    result = runner.invoke(app, ["nem12", "inspect", str(tmp_path / "absent.csv")])
    assert result.exit_code == 2


#: A file of days a meter cannot have read yet whatever the day the tests run: the last day a
#: read may have, far ahead.
AHEAD = nem12(
    channel(nmi="NMI0000003", suffix="E1"),
    day("20991230", value="0.5"),
    day("20991231", value="0.5"),
)


def test_the_reader_refuses_days_ahead_of_today_unless_told_and_then_names_them() -> None:
    refusing = NEM12Reader(AHEAD.encode(), name="ahead.csv", today=date(2026, 12, 5))
    with pytest.raises(NEM12Error, match=r"ahead\.csv:3: 2099-12-30 is more than 3 days ahead"):
        list(refusing.days())
    reading = NEM12Reader(AHEAD.encode(), name="ahead.csv", today=date(2026, 12, 5), future=True)
    assert [d.day for d in reading.days()] == [date(2099, 12, 30), date(2099, 12, 31)]
    assert (reading.stats.first_ahead, reading.stats.last_ahead) == (
        date(2099, 12, 30),
        date(2099, 12, 31),
    )
    assert reading.ahead_warning() == (
        "ahead.csv: 2099-12-30 to 2099-12-31 are more than 3 days after today (2026-12-05), so"
        " no meter has read them yet: read as written here (simulated or reference data), but"
        " 'freehours nem12 import' and the API refuse such a file"
    )
    within = NEM12Reader(FILE.encode(), today=date(2026, 7, 1), future=True)
    list(within.days())  # 2026-07-02 is a day ahead: within what a meter may have read
    assert within.ahead_warning() is None
    checked = NEM12Reader(AHEAD.encode(), today=date(2026, 12, 5), future=True)
    checked.check()
    assert checked.stats.last_ahead == date(2099, 12, 31)


def test_the_offline_tools_read_a_future_dated_file_with_a_warning_and_import_refuses_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "ahead.csv"
    path.write_text(AHEAD)
    code, out, err = run_flat(monkeypatch, capsys, "nem12", "inspect", str(path), "--json")
    assert code == 0
    assert json.loads(out)["to"] == "2099-12-31"
    assert f"warning: {path}: 2099-12-30 to 2099-12-31 are more than 3 days after today" in err
    code, out, err = run_flat(
        monkeypatch, capsys, "bill", "--nem12", str(path), "--plan", "sso-nsw", "--format", "json"
    )
    assert code == 0
    assert json.loads(out)["from"] == "2099-12-30"  # (its "to" the local day the last ends on)
    assert "'freehours nem12 import' and the API refuse such a file" in err
    monkeypatch.setenv("FREEHOURS_DATABASE_URL", f"sqlite:///{tmp_path / 'f.db'}")
    get_settings.cache_clear()  # the settings read afresh, with this database (and after)
    try:
        code, _, err = run_flat(monkeypatch, capsys, "nem12", "import", str(path))
    finally:
        get_settings.cache_clear()
    assert (code, err.partition(":")[0]) == (2, "error")
    assert "2099-12-30 is more than 3 days ahead of today" in err
    assert "nothing of" in err
