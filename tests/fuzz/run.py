"""Coverage-guided fuzzing of a target in ``tests/fuzz/targets.py`` with atheris (libFuzzer).

    python -m tests.fuzz.run TARGET [LIBFUZZER OPTIONS...]

Without corpus directories it grows ``tests/fuzz/corpus/TARGET`` from it and the hand-made
``tests/fuzz/seeds/TARGET`` (both kept in the repository and replayed by every test run).
``make fuzz`` instead grows a working corpus in ``out/fuzz`` for ``FUZZ_SECONDS``, then merges
(minimises) it with the kept one into ``tests/fuzz/corpus/TARGET``. An input that raises
anything but the target's documented error, or takes longer than ``-timeout`` seconds, is
written as ``crash-*`` / ``timeout-*`` in the current directory, with the traceback.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

import atheris

CORPUS = Path(__file__).with_name("corpus")
SEEDS = Path(__file__).with_name("seeds")

with atheris.instrument_imports(include=["freehours"]):
    from tests.fuzz.targets import TARGETS


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in TARGETS:
        sys.exit(f"usage: python -m tests.fuzz.run {{{','.join(TARGETS)}}} [libFuzzer options]")
    name, options = argv[0], argv[1:]
    corpus = CORPUS / name
    corpus.mkdir(parents=True, exist_ok=True)
    target = TARGETS[name]
    args = [_relauncher(name), *options]
    if not any(not option.startswith("-") for option in options):
        args += [str(corpus), str(SEEDS / name)]
    atheris.Setup(args, target)
    atheris.Fuzz()


def _relauncher(name: str) -> str:
    """An executable that runs this target again: libFuzzer starts ``argv[0]`` anew for a merge
    (``-merge=1``) and for each fork, with its own options after it."""
    launcher = Path(tempfile.gettempdir()) / f"freehours-fuzz-{name}"
    launcher.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tests.fuzz.run {name} "$@"\n'
    )
    launcher.chmod(0o755)
    return str(launcher)


if __name__ == "__main__":
    main(sys.argv[1:])
