"""The OpenAPI document as the API serves it, written to or checked against a file:

    python -m freehours.api.schema --write docs/openapi.json
    python -m freehours.api.schema --check docs/openapi.json

Apart from ``freehours.api.openapi``, which every route imports for its answers' descriptions,
because this one builds the application.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from freehours.api.app import assemble
from freehours.api.openapi import COMMITTED, REGENERATE, render


def served() -> dict[str, Any]:
    """The document the API serves (no database needed: no setting changes it)."""
    return assemble().openapi()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m freehours.api.schema",
        description="Write the API's OpenAPI document, or check a written one against it.",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", metavar="FILE", type=Path, help=f"write it (e.g. {COMMITTED})")
    action.add_argument("--check", metavar="FILE", type=Path, help="exit 1 if FILE differs")
    args = parser.parse_args(argv)
    text = render(served())
    if args.write is not None:
        args.write.write_text(text, encoding="utf-8")
        return 0
    path: Path = args.check
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        print(
            f"{path} is not the API's OpenAPI document; regenerate it: {REGENERATE}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
