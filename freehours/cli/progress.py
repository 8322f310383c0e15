"""A command's progress bar (Rich), shown while its work runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from rich.progress import Progress


class ProgressDisplay:
    """A command's Rich progress, shown for the span of a ``with`` block (disabled by the
    subclass's ``Progress`` where the console is not a terminal)."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._progress.stop()
