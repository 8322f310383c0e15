"""The webhook tests' clock and receiver."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from freehours.clock import ManualClock
from tests.webhooks.receiver import Receiver, receiving


@pytest.fixture
def clock() -> ManualClock:
    # Started at the real time when the test starts: the reference library checks
    # webhook-timestamp against the system clock (within five minutes).
    return ManualClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as running:
        yield running
