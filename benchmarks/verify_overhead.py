"""What looprail's own checks add to a run (docs/loop.md, "Verification"), leaving out the
check commands' own time: the same project run twice, each task's `<verify>` with an
`<automated>` command (`true`) and without one (prose only), both runs under the local
runtime with an executor that does nothing. The commands' own time is the sum of the
`durationMs` of the run's `check` events (the bounded process, start to exit), so what is
left is looprail's: reading the checks, the tree id (a scratch-index `git write-tree` when
the project is a git repository), the judge, the logs, the journal rows, the merged-tree pass.

    overhead = (wall(checks) - commands' own time - wall(no checks)) / wall(no checks)

    python benchmarks/verify_overhead.py [--plans 3] [--tasks 5] [--repeat 3] [--no-git]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def plan_text(plan: int, tasks: int, checked: bool) -> str:
    body = []
    for t in range(1, tasks + 1):
        check = "<automated>true</automated>" if checked else ""
        body.append(
            f'<task type="auto"><name>t{t}</name><files>f{plan}-{t}.txt</files>'
            f"<action>do it</action><verify>it works{check}</verify><done>ok</done></task>"
        )
    return (
        f'---\nphase: 01-demo\nplan: "{plan:02d}"\ntype: execute\ndepends_on: []\n'
        f'files_modified: ["f{plan}.txt"]\nautonomous: true\n---\n'
        "<objective>bench</objective>\n<tasks>\n" + "\n".join(body) + "\n</tasks>\n"
    )


def project(root: Path, plans: int, tasks: int, checked: bool, git: bool) -> Path:
    p = root / ("checked" if checked else "plain")
    phase = p / ".planning" / "phases" / "01-demo"
    phase.mkdir(parents=True)
    (p / ".planning" / "config.json").write_text('{"looprail": {"worktrees": false}}')
    (phase / "01-CONTEXT.md").write_text("ctx\n")
    for n in range(1, plans + 1):
        (phase / f"01-{n:02d}-PLAN.md").write_text(plan_text(n, tasks, checked))
    agents = p / ".looprail" / "agents"
    agents.mkdir(parents=True)
    verifier = (
        'printf -- "---\\nstatus: passed\\n---\\n" > "$LOOPRAIL_PHASE_DIR/01-VERIFICATION.md"'
    )
    for name, body in (("executor", "exit 0"), ("verifier", verifier), ("orchestrator", "exit 0")):
        exe = agents / name
        exe.write_text(f"#!/bin/sh\n{body}\n")
        exe.chmod(0o755)
    if git and shutil.which("git"):
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
               "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}  # fmt: skip
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
            subprocess.run(["git", *args], cwd=p, env=env, check=True)
    return p


def one_run(p: Path) -> tuple[float, float]:
    """(wall seconds of `looprail run`, seconds the check commands took)."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "looprail", "-q", "run", str(p), "--phase", "1", "--jobs", "1"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{p.name}: run failed: {done.stderr.strip()[-400:]}")
    report = subprocess.run(
        [sys.executable, "-m", "looprail", "report", str(p), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(report.stdout)
    own = sum(
        (c.get("durationMs") or 0) / 1000
        for w in data["waves"]
        for plan in w["plans"]
        for t in plan["tasks"]
        for c in t.get("checks", [])
        if c["outcome"] in ("passed", "failed")
    )
    return wall, own


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-git", action="store_true")
    args = ap.parse_args()
    plain_walls, checked_walls, owns = [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            plain = project(root, args.plans, args.tasks, False, not args.no_git)
            checked = project(root, args.plans, args.tasks, True, not args.no_git)
            plain_walls.append(one_run(plain)[0])
            wall, own = one_run(checked)
            checked_walls.append(wall)
            owns.append(own)
    base = statistics.median(plain_walls)
    with_checks = statistics.median(checked_walls)
    own = statistics.median(owns)
    n = args.plans * args.tasks
    print(f"{args.plans} plans x {args.tasks} tasks ({n} checks + {n} on the merged tree)")
    print(f"  run without checks: {base:.3f}s (median of {args.repeat})")
    print(f"  run with checks:    {with_checks:.3f}s, of which the commands' own {own:.3f}s")
    added = with_checks - own - base
    print(f"  looprail's own added: {added:.3f}s = {added / base:.1%} of the run without checks")
    print(f"  per check: {added / (2 * n) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
