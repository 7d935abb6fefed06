"""A run's start and end: what it is given (`load`: the project, its capabilities, the config,
the runtime), whether it talks on the terminal (`interactive`), the journal run it opens or
resumes (`open`, with what a resumed run takes back: `resume`), and `phase.run_phase`, which
does all of it around one `LoopRunner` (`machine/runner.py`) and closes the run.

Nothing is re-exported: the runner imports `resume`, and `phase` imports the runner.
"""
