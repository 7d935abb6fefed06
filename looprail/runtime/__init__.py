"""Runtimes: where the loop's work is executed (`base.Runtime`, found by name in `registry`).
Re-exports nothing: the hooks layer imports `base` and `process` for every check, and the
other modules would add about 0.15 s of CPU to each of those processes."""
