"""No file stops the others: every kind of bad file in one inbox, the agent a process sending to a
real API server process, and every good file arrives while the agent keeps running.

And a spool belongs to one API: an agent for another API, given the first one's spool, neither
sends nor chokes on what waits in it, and says what it found.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import signal
import time
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

import pytest

from freehours.agent.spool import Spool
from freehours.domain.time import NEM_TIME
from freehours.meterdata.nem12 import read_days
from freehours.meterdata.writer import write_nem12
from freehours.sim.meters import households, meter_days
from tests.agent.conftest import AgentProcess, ApiSite
from tests.agent.test_end_to_end import saved_answers
from tests.support import eventually

pytestmark = pytest.mark.slow

StartAgent = Callable[..., AgentProcess]
#: The API's upload limit in this test: a file over it passes the agent and is the API's 413.
API_UPLOAD_LIMIT = 1024 * 1024


def nem12(day: date, seed: int) -> bytes:
    """A day of a few households' reads, as a NEM12 file's bytes."""
    meters = households(3, random.Random(seed))
    days = [
        read
        for household in meters
        for read in meter_days(household, day, 1, random.Random(f"{seed}:{household.nmi}"))
    ]
    out = io.StringIO(newline="")
    write_nem12(days, out, created=datetime(2026, 9, 1, tzinfo=NEM_TIME))
    return out.getvalue().encode()


def age(path: Path, seconds: float) -> None:
    """Last modified ``seconds`` ago (and so, in the inbox, taken in that order)."""
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp), follow_symlinks=False)


def without_file_permission_override() -> list[str]:
    """A command prefix that runs the agent unable to read a file its mode forbids: as root,
    without the capabilities that override file modes (as a service user runs it)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, and no setpriv to run the agent without CAP_DAC_OVERRIDE")
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}"]


def test_every_bad_file_goes_to_rejected_and_every_good_one_arrives(
    api_site: ApiSite, start_agent: StartAgent, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    good: dict[str, bytes] = {
        "plain-20260701.csv": nem12(date(2026, 7, 1), 1),
        "Zählerdaten-20260702.csv": nem12(date(2026, 7, 2), 2),  # not ASCII
        "two\nlines-20260703.csv": nem12(date(2026, 7, 3), 3),  # a newline
        "tab\tand\x1bescape-20260704.csv": nem12(date(2026, 7, 4), 4),  # control characters
    }
    growing_name, growing = "growing-20260705.csv", nem12(date(2026, 7, 5), 5)
    # The oldest first: the poison batches are at the head of the spool, the good ones behind.
    (inbox / "not-nem12.csv").write_bytes(b"this is not a NEM12 file\n")
    age(inbox / "not-nem12.csv", 60)
    over_api = inbox / "over-the-apis-limit.csv"
    over_api.write_bytes(good["plain-20260701.csv"])
    os.truncate(over_api, 2 * API_UPLOAD_LIMIT)  # under the agent's limit, over the API's
    age(over_api, 55)
    huge = inbox / "huge.csv"
    huge.touch()
    os.truncate(huge, 2 * 1024**3)  # 2 GiB, sparse: no disk; never read
    age(huge, 50)
    locked = inbox / "locked.csv"
    locked.write_bytes(nem12(date(2026, 7, 6), 6))
    locked.chmod(0)
    age(locked, 45)
    for number, (name, content) in enumerate(good.items()):
        (inbox / name).write_bytes(content)
        age(inbox / name, 40 - number)
    half = len(growing) // 2
    (inbox / growing_name).write_bytes(growing[:half])  # being written

    api_site.env["FREEHOURS_MAX_UPLOAD_BYTES"] = str(API_UPLOAD_LIMIT)
    spool = tmp_path / "spool.db"
    with api_site.serve():
        agent = start_agent(
            api_site,
            *("--nem12-dir", str(inbox), "--spool", str(spool), "--settle-seconds", "2"),
            prefix=without_file_permission_override(),
        )
        done, rejected = inbox / "done", inbox / "rejected"

        def names(folder: Path) -> set[str]:
            return {path.name for path in folder.iterdir()} if folder.exists() else set()

        bad = {"not-nem12.csv", "over-the-apis-limit.csv", "huge.csv", "locked.csv"}

        def all_moved_but_the_growing_one() -> bool:
            # The writer of the growing file is still at it: it is touched, never taken.
            assert agent.process.poll() is None, agent.stderr.read_text()
            assert growing_name not in names(done) | names(rejected)
            os.utime(inbox / growing_name)
            return names(done) >= set(good) and names(rejected) >= bad

        eventually(all_moved_but_the_growing_one, within=90, what="files moved", every=0.3)
        assert (inbox / growing_name).exists()
        with (inbox / growing_name).open("ab") as file:  # finished
            file.write(growing[half:])
        eventually(lambda: growing_name in names(done), within=30, what="the finished file sent")
        assert agent.process.poll() is None  # still watching
        agent.process.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0

    # Every good file arrived, under a name that could travel, and is stored as it was.
    assert names(done) == {*good, growing_name}
    assert sorted(path.name for path in inbox.iterdir()) == ["done", "rejected"]
    answers = saved_answers(api_site)
    # (The API keeps its answer to the file that is not NEM12; its 413 is given before that.)
    assert sorted(status for status, _ in answers) == [200] * (len(good) + 1) + [422]
    assert {body["file"] for status, body in answers if status == 200} == {
        "plain-20260701.csv",
        "Z%C3%A4hlerdaten-20260702.csv",
        "two%0Alines-20260703.csv",
        "tab%09and%1Bescape-20260704.csv",
        growing_name,
    }
    expected = {
        (day.nmi, day.suffix, day.day): day.values
        for name in [*good, growing_name]
        for day in read_days(done / name)
    }
    with api_site.store() as store, store.read() as unit:
        stored = {
            (day.nmi, day.suffix, day.day): day.values
            for nmi in sorted({nmi for nmi, _, _ in expected})
            for day in unit.meter.days_for(nmi, sorted({day for _, _, day in expected}))
        }
    assert stored == expected

    # Every bad file is in rejected/ with why; the API's refusals also with its problem.
    def reason(name: str) -> str:
        return (rejected / f"{name}.reason.txt").read_text()

    assert names(rejected) == bad | {f"{name}.reason.txt" for name in bad} | {
        "not-nem12.csv.problem.json",
        "over-the-apis-limit.csv.problem.json",
    }
    assert "unreadable: [Errno 13] Permission denied" in reason("locked.csv")
    assert "too large: 2147483648 bytes, over the agent's limit of 104857600" in reason("huge.csv")
    assert "refused by the API at" in reason("not-nem12.csv")
    assert "HTTP 422" in reason("not-nem12.csv")
    assert "HTTP 413" in reason("over-the-apis-limit.csv")
    assert (rejected / "huge.csv").stat().st_size == 2 * 1024**3

    summary = agent.summary()
    assert summary["files_done"] == len(good) + 1
    assert summary["files_rejected"] == len(bad)
    assert summary["rejected"] == 2  # the two poison batches, set aside
    assert summary["breaker_trips"] == 0
    assert summary["pending"] == 0
    events = [line["event"] for line in agent.logs()]
    assert events.count("file_name_encoded") == 3
    assert "sender_failed" not in events
    with Spool.open(spool) as nothing_left:
        assert nothing_left.pending() == 0


def test_a_spool_belongs_to_one_api(
    api_site: ApiSite,
    other_api_site: ApiSite,
    start_agent: StartAgent,
    tmp_path: Path,
) -> None:
    first_inbox, second_inbox = tmp_path / "first", tmp_path / "second"
    first_inbox.mkdir()
    second_inbox.mkdir()
    for number in range(3):
        path = first_inbox / f"first-{number}.csv"
        path.write_bytes(nem12(date(2026, 7, 1 + number), number))
        age(path, 10)
    (second_inbox / "second.csv").write_bytes(nem12(date(2026, 8, 1), 9))
    age(second_inbox / "second.csv", 10)
    spool = tmp_path / "spool.db"
    state = tmp_path / "state"

    # The first API is down: its agent spools the three files and gives up for now.
    first = start_agent(
        api_site,
        *("--nem12-dir", str(first_inbox), "--once", "--spool", str(spool)),
        *("--drain-timeout", "1", "--breaker-reset", "60"),
    )
    assert first.wait(60) == 1
    assert first.summary()["pending"] == 3

    # An agent for the second API, given that spool, says what is in it and does not start.
    with other_api_site.serve():
        wrong = start_agent(
            other_api_site,
            *("--nem12-dir", str(second_inbox), "--once", "--spool", str(spool)),
        )
        assert wrong.wait(60) == 1
        error = wrong.stderr.read_text()
        assert f"belongs to the API at {api_site.url}" in error
        assert "3 batches wait in it to be sent there" in error
        (line,) = [line for line in wrong.logs() if line["event"] == "spool_belongs_to_another_api"]
        assert (line["spool_api"], line["pending"]) == (api_site.url, 3)
        assert line["spool_inbox"] == str(first_inbox.resolve())
        assert saved_answers(other_api_site) == []
        assert sorted(path.name for path in second_inbox.iterdir()) == ["second.csv"]

        # Without --spool it has a spool of its own, and sends its own file.
        own = start_agent(
            other_api_site,
            *("--nem12-dir", str(second_inbox), "--once"),
            env={"XDG_STATE_HOME": str(state)},
        )
        assert own.wait(60) == 0
        assert own.summary()["files_done"] == 1
    assert len(saved_answers(other_api_site)) == 1
    (own_spool,) = (state / "freehours").glob("agent-spool-*.db")
    assert own_spool != spool

    # The first API's batches waited for it, and went there.
    with Spool.open(spool) as kept:
        assert kept.pending() == 3
    with api_site.serve():
        again = start_agent(
            api_site, *("--nem12-dir", str(first_inbox), "--once", "--spool", str(spool))
        )
        assert again.wait(60) == 0
    assert again.summary()["sent"] == 3
    assert len(saved_answers(api_site)) == 3
    assert sorted(path.name for path in (first_inbox / "done").iterdir()) == [
        f"first-{number}.csv" for number in range(3)
    ]
