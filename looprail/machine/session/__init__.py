"""A run's start and end: what it is given (`load`, `interactive`), the journal run it opens or
resumes (`open`, `resume`), and `phase.run_phase` around one `LoopRunner`. Nothing is
re-exported: the runner imports `resume`, and `phase` imports the runner."""
