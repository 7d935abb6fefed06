"""The cyclic garbage collector, paused while a short command starts up.

Start-up (imports: pydantic, statemachine, yaml, looprail's own modules) allocates a great many
objects and almost no cyclic garbage, and the collector would walk them over and over (~8% of
an idle `looprail run`). The console script pauses it (`pause`); it is resumed (`resume`)
before any command runs its handler, except the commands that resume it themselves once their
start-up is over (`looprail run`/`resume`: when the loop starts) or are short and bounded
(`loop render-hooks`). Resuming freezes what start-up made (`gc.freeze`: moved to the permanent
generation, so later collections do not walk it again) and re-enables collection. Embedders
and tests calling `looprail.cli.main()` never pause it.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Stop automatic collection until `resume()` (only if it is on: never turn it on)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Undo `pause()`: freeze start-up's objects and collect automatically again."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def paused() -> bool:
    return _paused
