"""What is generated from the code, written where it is kept: ``python -m freehours.cli.docs``
rewrites each file that differs from what the code gives; ``--check`` changes nothing and exits 1
naming the stale ones (``tests/cli/test_docs.py`` does the same).

- ``freehours/cli/settings.json``: every ``FREEHOURS_*`` setting (``Settings``, ``AgentSettings``
  and the options that read one), its default and what it is. ``freehours settings`` lists them
  from this file, since importing the models would cost it pydantic's start-up (0.15 s).
- ``docs/cli.md``: every command and sub-command as the Typer app builds it: usage, help, each
  option and argument with its metavar, default and help, whether it needs a database, and the
  settings.
- ``docs/plan.schema.json``: the plan file's JSON Schema, ``PlanDocument.model_json_schema()``.
- The blocks of ``docs/*.md`` between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``
  (``BLOCKS``): the built-in plans in ``docs/plan.md``.

This module is for the repository's own files: no command imports it.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

import freehours
from freehours.cli import COMMANDS, load_every

#: The checkout: the package's parent directory.
ROOT = Path(freehours.__file__).resolve().parent.parent
#: The command that regenerates every file here (the tests name it when one is stale).
REGENERATE = "python -m freehours.cli.docs"
SETTINGS_JSON = Path("freehours/cli/settings.json")
CLI_MD = Path("docs/cli.md")
PLAN_SCHEMA = Path("docs/plan.schema.json")
_BLOCK = re.compile(r"(<!-- generated: ([a-z-]+) -->\n)(.*?)(<!-- end generated -->)", re.S)


@dataclass(frozen=True, slots=True)
class Setting:
    """One environment variable freehours reads: its name, its default as text, what it is."""

    name: str
    default: str
    description: str

    def as_json(self) -> dict[str, str]:
        return {"name": self.name, "default": self.default, "description": self.description}


def default_text(value: object) -> str:
    """A setting's default as the help writes it: ``unset`` for None, ``5`` for 5.0."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def settings() -> list[Setting]:
    """Every ``FREEHOURS_*`` variable: the server's settings, the meter agent's, then the options
    that read one of their own (``--api-key``, ``FREEHOURS_API_KEY``)."""
    from freehours.agent.settings import AgentSettings
    from freehours.settings import Settings

    found = [
        Setting(f"FREEHOURS_{name.upper()}", default_text(field.default), field.description or "")
        for name, field in Settings.model_fields.items()
    ]
    found += [
        Setting(
            f"FREEHOURS_AGENT_{name.upper()}",
            default_text(field.default),
            f"the meter agent's --{name.replace('_', '-')}: {field.description}",
        )
        for name, field in AgentSettings.model_fields.items()
    ]
    known = {setting.name for setting in found}
    for path, command in every_command():
        for param in command.params:
            envvar = getattr(param, "envvar", None)
            if isinstance(envvar, str) and envvar.startswith("FREEHOURS_") and envvar not in known:
                known.add(envvar)
                found.append(
                    Setting(
                        envvar, "unset", f"freehours {' '.join(path)} {param.opts[0]}: {param.help}"
                    )
                )
    return found


def settings_json() -> str:
    return json.dumps([setting.as_json() for setting in settings()], indent=2) + "\n"


def every_command() -> Iterator[tuple[list[str], Any]]:
    """Each command and sub-command (its words after ``freehours``), as built to run."""

    def walk(path: list[str], command: Any) -> Iterator[tuple[list[str], Any]]:
        yield path, command
        for name, sub_command in getattr(command, "commands", {}).items():
            yield from walk([*path, name], sub_command)

    for name, command in load_every().items():
        yield from walk([name], command)


def _cell(text: str) -> str:
    """``text`` in a Markdown table cell: one line, ``|``, ``*`` and ``<`` escaped."""
    one_line = " ".join(text.split())
    return one_line.replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;")


def _paragraphs(help_text: str) -> list[str]:
    """A docstring's paragraphs, each joined into one line."""
    return [" ".join(part.split()) for part in inspect.cleandoc(help_text).split("\n\n")]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _command_section(path: list[str], command: Any) -> list[str]:
    name = " ".join(["freehours", *path])
    ctx = typer.Context(command, info_name=name)
    usage = " ".join([name, *command.collect_usage_pieces(ctx)])
    lines = [f"### {name}", "", f"`{usage}`", ""]
    for paragraph in _paragraphs(command.help or ""):
        lines += [paragraph, ""]
    if getattr(command.callback, "needs_database", False):
        lines += [
            "Works on an existing database: without `FREEHOURS_DATABASE_URL` it refuses (exit"
            " status 1) unless `./freehours.db` exists ([the database](#the-database)).",
            "",
        ]
    sub_commands = getattr(command, "commands", {})
    if sub_commands:
        lines += ["| command | what it does |", "|---|---|"]
        for sub_name, sub_command in sub_commands.items():
            heading = f"{name} {sub_name}"
            short = _paragraphs(sub_command.help or "")[0]
            lines.append(f"| [`{heading}`](#{_anchor(heading)}) | {_cell(short)} |")
        lines.append("")
    records = [
        param.get_help_record(ctx)
        for param in command.params
        if param.get_help_record(ctx) is not None
    ]
    if records:
        lines += ["| option or argument | what |", "|---|---|"]
        for shown, help_text in records:
            lines.append(f"| `{shown}` | {_cell(help_text)} |")
        lines.append("")
    return lines


def cli_markdown() -> str:
    """``docs/cli.md``."""
    commands = list(every_command())
    lines = [
        "# The command line",
        "",
        "Generated from the Typer app by `python -m freehours.cli.docs` (`tests/cli/test_docs.py`"
        " fails when this page differs from what the app gives); the contract these commands"
        " keep is [design.md, section 4](design.md#4-command-line-contract). Every command"
        " takes `--help`.",
        "",
        "## Exit status",
        "",
        "| status | when |",
        "|---|---|",
        "| 0 | success |",
        "| 1 | any other failure: settings or an environment that cannot work (a database that"
        " is missing, unreachable or at another schema revision), a broken invariant or"
        " must-hold (`demo`, `simulate incident`), reads left in the agent's spool |",
        "| 2 | bad usage or bad input: the message on stderr names the option, or the file and"
        " line (a plan's problems name its keys); `nem12 import` when a file was not stored |",
        "| 130 | interrupted (Ctrl-C); `nem12 import` says which files landed |",
        "",
        "## The database",
        "",
        "The commands that work on a database read it from `FREEHOURS_DATABASE_URL`. A new,"
        " empty database there is migrated by whichever command opens it first; one whose schema"
        " is behind is upgraded only by `freehours db upgrade`. Without `FREEHOURS_DATABASE_URL`"
        " they refuse (exit status 1) unless the default, `./freehours.db`, exists: `freehours"
        " db upgrade` creates it. `demo` and `simulate incident` make databases of their own.",
        "",
        "## Lists",
        "",
        "`invoices list`, `customers list`, `keys list`, `webhooks list`, `webhooks deliveries`,"
        " `plans list` and `settings` print a table on a terminal and JSON when their output is"
        " piped or written to a file, so that `freehours invoices list | jq` needs no flag;"
        " `--format table` or `--format json` chooses. The JSON is an array of objects, the"
        " API's items key for key where the API serves the same list (`GET /v1/invoices`,"
        " `GET /v1/webhook-endpoints`). A table fits the terminal's width: numbers and"
        " identifiers are never cut, free text (a URL, a name) breaks over lines, and where that"
        " is not enough the columns of least use are left out, the caption naming them.",
        "",
        "## Comparisons",
        "",
        "`freehours compare --nem12 FILE --plan PLAN ...` rates a household's own data under each"
        " plan given (a built-in plan id, a TOML plan file, or a CDR plan document, JSON; every"
        " built-in plan when neither these nor `--offers` are given; with `--offers`, every"
        " offer stored too, its latest version; at most 50) and ranks them cheapest first by the"
        " total over the data. Each plan's figures are its own bill's, as `freehours bill"
        " --plan` makes it: the same local days (the plan's clock), the same total to the cent,"
        " the same free energy and value. Beside them: `per_year`, the total over the days"
        " billed times 365 (rounded half up to the cent), and `room_kwh`, the energy used outside"
        " the free window on days whose cap still had room, each day the smaller of the two: what"
        " moving use into the window could have made free. A file dated past today + 3 days is"
        " read with a warning, as `bill` reads it.",
        "",
        "## Customer files",
        "",
        "`freehours customers import FILE` reads a CSV file (UTF-8, comma-separated, quoted as"
        " RFC 4180 quotes) whose first line names its columns, in any order: `nmi`, `plan_id`"
        " and `region` are required; `billing_cycle`, `anchor_day` and `payment_term_days`, where"
        " a row fills them, set those fields of its cycle (the others keep what is stored, or the"
        " defaults for a new customer); `name`, `supply_address_1` to `supply_address_4`,"
        " `billing_address_1` to `billing_address_4`, `email` and `delivery`, where a row fills"
        " any of them, give its whole contact, checked as `PUT /v1/customers/{nmi}` checks it."
        " The file is checked whole before anything is stored and stored in one transaction: a"
        " bad row (or an NMI twice, an unknown plan, a plan of another region) stores nothing,"
        " and the message names the file, the line and the column, never a personal field's"
        " value. At most 200,000 rows and 64 MiB a file (a larger book goes in several files).",
        "",
        "## Commands",
        "",
    ]
    for path, _ in commands:
        if len(path) == 1:
            name = f"freehours {path[0]}"
            lines.append(f"- [`{name}`](#{_anchor(name)}): {_cell(COMMANDS[path[0]].help)}")
    lines.append("")
    for path, command in commands:
        lines += _command_section(path, command)
    lines += [
        "## Settings",
        "",
        "Read once at start-up from the environment; `freehours settings` lists them too. An"
        " option of `freehours agent` overrides the `FREEHOURS_AGENT_*` setting of its name.",
        "",
        "| variable | default | what |",
        "|---|---|---|",
    ]
    for setting in settings():
        lines.append(f"| `{setting.name}` | `{setting.default}` | {_cell(setting.description)} |")
    return "\n".join(lines) + "\n"


def plan_schema() -> str:
    """``docs/plan.schema.json``: the plan document's JSON Schema (draft 2020-12)."""
    from freehours.plans.document import PlanDocument

    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **PlanDocument.model_json_schema(),
    }
    return json.dumps(schema, indent=2) + "\n"


def builtin_plans_block() -> str:
    """The built-in plans, one row each, from ``freehours/plans/builtin/``."""
    from freehours.plans import builtin_plans

    rows = ["| id | region | time zone | free window | description |", "|---|---|---|---|---|"]
    for plan in builtin_plans():
        window = "none"
        if plan.free_window is not None:
            window = f"{plan.free_window.label}, up to {plan.free_window.cap_kwh} kWh a day"
        file = f"../freehours/plans/builtin/{plan.id}.toml"
        rows.append(
            f"| [`{plan.id}`]({file}) | {plan.region} | {plan.zone_name} | {window} |"
            f" {_cell(plan.description)} |"
        )
    return "\n".join(rows) + "\n"


#: The generated blocks of hand-written pages, by name.
BLOCKS: dict[str, Callable[[], str]] = {"builtin-plans": builtin_plans_block}


def with_blocks(text: str) -> str:
    """``text`` with each generated block's content made anew."""

    def fill(match: re.Match[str]) -> str:
        return f"{match.group(1)}{BLOCKS[match.group(2)]()}{match.group(4)}"

    return _BLOCK.sub(fill, text)


def generated() -> dict[Path, str]:
    """Each generated file (relative to the checkout) and what it should hold."""
    files = {
        SETTINGS_JSON: settings_json(),
        CLI_MD: cli_markdown(),
        PLAN_SCHEMA: plan_schema(),
    }
    for page in sorted((ROOT / "docs").glob("*.md")):
        relative = page.relative_to(ROOT)
        if relative not in files:
            text = page.read_text(encoding="utf-8")
            if _BLOCK.search(text):
                files[relative] = with_blocks(text)
    return files


def stale() -> list[Path]:
    """The generated files that differ from what the code gives now."""
    return [
        path
        for path, text in generated().items()
        if not (ROOT / path).is_file() or (ROOT / path).read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    if args.check:
        paths = stale()
        for path in paths:
            print(f"{path} is stale: run {REGENERATE}", file=sys.stderr)
        return 1 if paths else 0
    for path, text in generated().items():
        target = ROOT / path
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
