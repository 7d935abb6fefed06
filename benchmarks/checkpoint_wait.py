"""What a run waiting at a checkpoint costs while nobody answers: the CPU time of a real
`looprail run` on a pseudo-terminal, waiting at a human-verify checkpoint for --seconds (it polls
the journal for an answer given elsewhere every `machine.checkpoint.POLL_S`), against the same
run paused without a terminal (the baseline: it starts, runs the first task, journals the
checkpoint and exits). Both measured in one run, same machine, same load.

    extra CPU while waiting = (cpu(waiting) - cpu(paused)) / seconds   (CPU seconds per second)

The waiting run, once answered, also verifies and ships (the paused one stops at the
checkpoint), so the figure is an upper bound on what waiting costs.

    python benchmarks/checkpoint_wait.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PLAN = """---
phase: 01-demo
plan: "01"
type: execute
depends_on: []
files_modified: []
autonomous: false
---
<objective>wait</objective>
<tasks>
<task type="auto"><name>first</name><action>do it</action></task>
<task type="checkpoint:human-verify" gate="blocking">
  <what-built>it</what-built>
  <how-to-verify>look</how-to-verify>
  <resume-signal>Type "approved" or describe issues</resume-signal>
</task>
</tasks>
"""


def project(root: Path) -> Path:
    p = root / "project"
    phase = p / ".planning" / "phases" / "01-demo"
    phase.mkdir(parents=True)
    (p / ".planning" / "config.json").write_text("{}")
    (phase / "01-CONTEXT.md").write_text("ctx\n")
    (phase / "01-01-PLAN.md").write_text(PLAN)
    agents = p / ".looprail" / "agents"
    agents.mkdir(parents=True)
    for name, body in (
        ("executor", "exit 0"),
        (
            "verifier",
            'printf -- "---\\nstatus: passed\\n---\\n" > "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md"',
        ),
        ("orchestrator", "exit 0"),
    ):
        (agents / name).write_text(f"#!/bin/sh\n{body}\n")
        (agents / name).chmod(0o755)
    return p


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def paused(root: Path) -> float:
    p = project(root / "paused")
    before = children_cpu()
    out = subprocess.run(
        [sys.executable, "-m", "looprail", "run", str(p), "--phase", "1"],
        capture_output=True,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 3, out.stderr
    return children_cpu() - before


def waiting(root: Path, seconds: float) -> float:
    from tests.support.terminal import Terminal

    p = project(root / "waiting")
    before = children_cpu()
    term = Terminal("run", str(p), "--phase", "1", cwd=p)
    term.expect("YOUR ACTION:")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        term._pump(0.2)
    term.send("approved")
    assert term.wait() == 0, term.text
    return children_cpu() - before


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("HOME", tmp)
        base = paused(Path(tmp))
        wait = waiting(Path(tmp), args.seconds)
    extra = max(0.0, wait - base)
    print(
        json.dumps(
            {
                "paused_cpu_s": round(base, 3),
                "waiting_cpu_s": round(wait, 3),
                "seconds_waited": args.seconds,
                "extra_cpu_per_second_waited": round(extra / args.seconds, 4),
                "waiting_vs_paused": round(wait / base, 2) if base else None,
            }
        )
    )


if __name__ == "__main__":
    main()
