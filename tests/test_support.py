"""The one deadline-poll helper of the tests, ``eventually``: an answer as soon as there is one,
a failure naming what did not happen and what was last seen, an assertion giving up at once."""

from __future__ import annotations

import pytest

from tests.support import eventually


def test_eventually_returns_the_first_truthy_answer() -> None:
    answers = iter([None, 0, "up"])
    assert eventually(lambda: next(answers), every=0) == "up"


def test_eventually_counts_an_ignored_exception_as_no_answer_and_reports_it() -> None:
    answers = iter([ConnectionRefusedError("not yet"), "up"])

    def look() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert eventually(look, every=0, ignoring=(OSError,)) == "up"

    def refused() -> str:
        raise ConnectionRefusedError("refused")

    with pytest.raises(pytest.fail.Exception, match=r"the API coming up .* ConnectionRefused"):
        eventually(refused, within=0.05, every=0.01, what="the API coming up", ignoring=(OSError,))


def test_an_assertion_in_the_look_gives_up_at_once_whatever_is_ignored() -> None:
    def exited() -> bool:
        raise AssertionError("the process exited")

    with pytest.raises(AssertionError, match="exited"):
        eventually(exited, within=30, ignoring=(Exception,))
