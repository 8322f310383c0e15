"""The fault-injection seam: where a test or the simulation makes a service fail, or hang, at a
point of its own choosing.

A service names its points in a ``StrEnum`` and, at each, calls ``faults.check(point, subject)``
with what the point concerns (the settlement: the quota; an invoice batch: its job's key); a
fault raises there, or blocks. In production it is ``NoFaults``: nothing is injected.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

Point_contra = TypeVar("Point_contra", contravariant=True)
Subject_contra = TypeVar("Subject_contra", contravariant=True)


class Faults(Protocol[Point_contra, Subject_contra]):
    """Raise (or block) at ``point`` concerning ``subject`` to inject a fault there."""

    def check(self, point: Point_contra, subject: Subject_contra) -> None: ...


class NoFaults:
    """Production: nothing is injected."""

    def check(self, point: object, subject: object) -> None:
        return None
