"""Exponential backoff, written once for the job queue, the settlement service and the agent.

    ceiling(attempt, base, cap) = min(cap, base * 2**attempt)     attempt: failed attempts - 1
    full_jitter(attempt, base, cap, random) = uniform(0, ceiling(attempt, base, cap))

Full jitter (AWS's "Exponential Backoff And Jitter") spreads the retries of clients that failed
together over the whole window, so they do not come back together. The settlement service, which
only tells its caller how long to wait, answers the ceiling itself; the job queue and the agent,
which wait, draw full jitter from an injected random source, so tests pin both the clock and the
draw. Stdlib only, and nothing of any domain: any package may use it.
"""

from __future__ import annotations

from typing import Protocol

#: Above this exponent ``base * 2**attempt`` is past any sensible cap already; stopping there
#: keeps the float finite however many attempts have failed.
_MAX_EXPONENT = 62


class RandomSource(Protocol):
    """Where jitter comes from: ``random.Random`` in production, seeded or stubbed in tests."""

    def uniform(self, a: float, b: float) -> float: ...


def ceiling(attempt: int, base: float, cap: float) -> float:
    """The longest wait, in seconds, after failed attempt number ``attempt`` (0 for the first):
    ``base`` doubled per attempt, at most ``cap``."""
    return min(cap, base * 2.0 ** min(max(0, attempt), _MAX_EXPONENT))


def full_jitter(attempt: int, base: float, cap: float, random: RandomSource) -> float:
    """A wait drawn uniformly between nothing and the ``ceiling``, in seconds."""
    return random.uniform(0.0, ceiling(attempt, base, cap))
