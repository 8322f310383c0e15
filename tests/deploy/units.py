"""deploy/ read as systemd and the shell would: the units' sections and command lines, the
example environment files' variables (for tests/deploy)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
UNITS = DEPLOY / "systemd"
GUIDE = ROOT / "docs" / "deployment.md"
#: Where the units expect freehours installed (docs/deployment.md).
INSTALLED = "/opt/freehours/venv/bin/freehours"
#: The worker instances the guide and the Prometheus configuration name (instance = port).
WORKER_PORTS = [9465, 9466]
#: Variables freehours reads that are not settings of its own: OpenTelemetry's exporter's.
FOREIGN = re.compile(r"OTEL_EXPORTER_OTLP_[A-Z_]+")
ASSIGNMENT = re.compile(r"^#?([A-Z][A-Z0-9_]*)=(.*)$")


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file's sections, each key with its values in order (keys may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None, f"{path.name}: {line!r} outside a section"
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


def exec_start(name: str, instance: str = "") -> list[str]:
    """The unit's ExecStart as the argv systemd runs (its specifiers, %i and %t, resolved)."""
    (line,) = unit(UNITS / name)["Service"]["ExecStart"]
    return shlex.split(line.replace("%i", instance).replace("%t", "/run"))


def environment_file(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The variables a file sets, and those it shows commented out (``#NAME=value``)."""
    set_here: dict[str, str] = {}
    shown: dict[str, str] = {}
    for line in path.read_text().splitlines():
        found = ASSIGNMENT.match(line)
        if found:
            (shown if line.startswith("#") else set_here)[found[1]] = found[2]
    return set_here, shown


def option(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]
