"""``freehours settings``: every ``FREEHOURS_*`` environment variable, its default, what it is,
and whether this environment sets it; never its value (a URL may hold a password, and
``FREEHOURS_API_KEY`` is a secret).

Read from ``settings.json``, which ``python -m freehours.cli.docs`` writes from the settings'
models (``Settings``, ``AgentSettings`` and the agent's options), so that the command costs no
pydantic start-up and says what docs/cli.md#settings says.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from freehours.cli import app
from freehours.cli.listing import FormatOption, ListFormat, chosen, counted, print_json


@app.command("settings")
def settings(output: FormatOption = None) -> None:
    """Every FREEHOURS_* setting: its default, what it is, and whether this environment sets it
    (never its value). Read once at start-up by each command; docs/cli.md#settings."""
    every = json.loads(Path(__file__).with_name("settings.json").read_text("utf-8"))
    if chosen(output) is ListFormat.JSON:
        print_json([{**setting, "set": setting["name"] in os.environ} for setting in every])
        return
    from rich.console import Console
    from rich.padding import Padding
    from rich.text import Text

    console = Console()
    console.print(Text("Settings: environment variables, read once at start-up", style="bold"))
    for setting in every:
        name = Text(setting["name"], style="bold cyan")
        if setting["name"] in os.environ:
            name.append("  (set here)", style="green")
        console.print()
        console.print(name)
        what = Text(setting["description"])
        what.append(f"\ndefault: {setting['default']}", style="dim")
        console.print(Padding(what, (0, 0, 0, 4)))
    console.print()
    console.print(counted(len(every), "setting"))
