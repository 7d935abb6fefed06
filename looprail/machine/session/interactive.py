"""`run --interactive` (the discuss step a conversation on the user's terminal): whether a run
is interactive, and whether it can be, decided once before it starts."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from looprail.errors import RefusedToStart
from looprail.runtime.interactive import terminal_problem

if TYPE_CHECKING:
    from looprail.machine.context import RunOptions


_CONFIG = ".planning/config.json"
_KEY = "looprail.interactive"


def interactive_options(options: RunOptions, configured: bool | None) -> RunOptions:
    """`options` with `interactive` decided (the option, else the config's `configured`);
    `RefusedToStart` for a run that should talk but has no terminal to talk on."""
    wanted = options.interactive
    if wanted is None:
        wanted = bool(configured)
    if wanted:
        problem = terminal_problem()
        if problem is not None:
            said = "--interactive" if options.interactive else f"{_KEY} in {_CONFIG}"
            also = "" if options.interactive else ", or pass --no-interactive"
            raise RefusedToStart(
                f"{said}: the discuss step is a conversation on your terminal, and {problem}; "
                f"run it from a terminal{also}",
                **({} if options.interactive else {"path": _CONFIG, "field": _KEY}),
            )
    return options if options.interactive is wanted else replace(options, interactive=wanted)
