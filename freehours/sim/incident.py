"""The incident, replayed: one workload and one set of faults, on the legacy model and on freehours.

    replay = replay_incident(meters=100, seed=1, settings=settings, work_dir=tmp)
    replay.as_json()      # {"legacy": {...}, "freehours": {...}, "retry_reduction": 0.9996}
    replay.failures()     # the must-holds freehours broke: [] when it kept them all

``retry_reduction`` is ``1 - retries of freehours / retries of legacy``, retries counted as
``freehours.sim.figures`` defines them, the same way for both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from freehours.settings import Settings
from freehours.sim.figures import RunFigures
from freehours.sim.legacy import replay_legacy
from freehours.sim.replay import replay_freehours
from freehours.sim.workload import FaultPlan, Workload

#: The incident report's fix cut retries by 95%: freehours must do at least as well.
MIN_RETRY_REDUCTION = 0.95


@dataclass(frozen=True, slots=True)
class IncidentReplay:
    """Both replays of one workload."""

    workload: Workload
    faults: FaultPlan
    legacy: RunFigures
    freehours: RunFigures

    @property
    def retry_reduction(self) -> float:
        if self.legacy.retries == 0:
            return 0.0
        return 1 - self.freehours.retries / self.legacy.retries

    def as_json(self) -> dict[str, Any]:
        return {
            "legacy": self.legacy.as_json(),
            "freehours": self.freehours.as_json(),
            "retry_reduction": round(self.retry_reduction, 4),
        }

    def failures(self) -> list[str]:
        """The must-holds freehours broke, each said in a sentence; empty when none."""
        run = self.freehours
        broken = []
        if self.retry_reduction < MIN_RETRY_REDUCTION:
            broken.append(
                f"retry_reduction {self.retry_reduction:.4f} is under {MIN_RETRY_REDUCTION}"
            )
        if run.duplicate_credits:
            broken.append(f"{run.duplicate_credits} duplicate credits")
        if run.jobs_stuck:
            broken.append(f"{run.jobs_stuck} jobs stuck over 20 s")
        if run.settled < run.quotas:
            broken.append(f"{run.quotas - run.settled} of {run.quotas} quotas unsettled")
        return broken


def replay_incident(
    meters: int,
    seed: int,
    settings: Settings,
    work_dir: Path,
    on_progress: Callable[[str, float], None] = lambda _design, _share: None,
) -> IncidentReplay:
    """Replay the incident with ``meters`` meters and the faults of ``seed``: the legacy model,
    then freehours over ``settings`` (its database must be empty; ``work_dir`` takes the
    agent's spool). ``on_progress`` hears the design replayed and the share of it done."""
    workload = Workload.incident(
        meters, seed, grace=timedelta(seconds=settings.settlement_grace_seconds)
    )
    faults = FaultPlan.draw(workload)
    on_progress("legacy", 0.0)
    legacy = replay_legacy(workload, faults)
    on_progress("legacy", 1.0)
    freehours = replay_freehours(
        workload, faults, settings, work_dir, lambda share: on_progress("freehours", share)
    )
    return IncidentReplay(workload, faults, legacy, freehours)
