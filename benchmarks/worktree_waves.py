"""Parallel plans with a real agent runtime: does a wave of 4 independent one-task plans at
`--jobs 4` take about as long as one plan? (issue 28: goal <= 1.15x at 1.5 s agent calls.)

Each run is `looprail run --agent claude` as a user types it (a subprocess), with a stand-in
`claude` on PATH (tests/fakes/fake_agent.py: the CLI's stream-json output, writes the task's
files) that sleeps `--agent-s` per call. With more than one plan in the wave each plan works in
its own git worktree (set up before the wave, merged back after it); a lone plan works in the
main tree. Both measured in the same run, alternately:

    ratio = execute(4 plans, --jobs 4) / execute(1 plan)
    execute = the journal's transition into the `execute` step -> the one out of it (the
              worktrees' set-up, every agent call, the merge back, whatever is left to do
              before the next step)

Also printed: the CPU time of each whole run (looprail and every process it started: the
steadier figure on a shared machine), the worktree work itself (set-up = execute entered ->
`wave_started`; merge = the last `task_finished` -> `wave_finished`), the whole `looprail run`
wall time, and the floor: 4 stand-ins started at once by hand against one alone (what 4 CLIs
sharing the CPUs cost without looprail: the ratio cannot be below it).

With `--against TREE` (a source tree, e.g. `git archive` of main) that tree's looprail runs
too, in the same rounds, with its own tree's fake agent, and its 4-plan runs are paired with
this tree's round by round. `--trace` counts each phase's git processes (GIT_TRACE2_EVENT).

    python benchmarks/worktree_waves.py [--plans 4] [--agent-s 1.5] [--repeat 3] [--against TREE]
        [--trace]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.loop_overhead import make_phase  # noqa: E402

FAKE = ROOT / "tests" / "fakes" / "fake_agent.py"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def fake_claude(root: Path, tree: Path = ROOT) -> Path:
    """A folder holding `claude`, the fake agent CLI of `tree` (each looprail with the fake of
    its own tree: the fake checks the argv that tree's adapter passes, e.g. `--` before the
    prompt since the real-CLI fixes)."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    target = bin_dir / "claude"
    fake = tree / FAKE.relative_to(ROOT)
    target.write_text(f"#!{sys.executable}\n" + (fake if fake.is_file() else FAKE).read_text())
    target.chmod(0o755)
    return bin_dir


def project(root: Path, plans: int) -> Path:
    """`plans` one-task plans in one wave (no dependencies), a git repository, agent claude."""
    folder = make_phase(root, plans, 1, 1)
    (folder / ".planning" / "config.json").write_text(json.dumps({"looprail": {"agent": "claude"}}))
    env = {**os.environ, **GIT_ENV}
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *argv], cwd=folder, env=env, check=True, capture_output=True)
    return folder


def marks(folder: Path) -> dict[str, Any]:
    """Seconds, from the journal's timestamps: execute, set-up, merge (see the module doc)."""

    def ts(text: str) -> float:
        return datetime.fromisoformat(text).timestamp()

    with sqlite3.connect(folder / ".looprail" / "journal.sqlite") as conn:
        rows = conn.execute("SELECT kind, ts, data FROM events ORDER BY seq").fetchall()
    entered = left = None
    for kind, when, data in rows:
        if kind != "transition":
            continue
        moved = json.loads(data or "{}")
        source, target = moved.get("source") or [], moved.get("target") or []
        if entered is None and "execute" in target:
            entered = ts(when)
        if entered is not None and "execute" in source and "execute" not in target:
            left = ts(when)
    started = min(ts(t) for k, t, _ in rows if k == "wave_started")
    finished = max(ts(t) for k, t, _ in rows if k == "wave_finished")
    last_task = max(ts(t) for k, t, _ in rows if k == "task_finished")
    assert entered is not None and left is not None, "no execute step in the journal"
    return {
        "execute": left - entered,
        "setup": started - entered,
        "merge": finished - last_task,
        "at": {"entered": entered, "started": started, "last": last_task, "finished": finished},
    }


PHASES = ("set-up", "wave", "merge", "after")


def git_calls(trace: Path, at: dict[str, float]) -> dict[str, list[tuple[float, str]]]:
    """The git processes of a run (GIT_TRACE2_EVENT), by phase of the execute step: each one's
    own run time (its `exit` event's t_abs) and its subcommand. Phases by its start: set-up
    (execute entered -> wave_started), wave (-> the last task_finished), merge (->
    wave_finished), after. Only top-level processes (git's children have a nested sid)."""
    starts: dict[str, tuple[float, str]] = {}
    out: dict[str, list[tuple[float, str]]] = {phase: [] for phase in PHASES}
    if not trace.is_file():
        return out
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        sid = event.get("sid", "")
        if "/" in sid:
            continue
        if event["event"] == "start":
            argv = _drop_config(event["argv"][1:])
            when = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
            starts[sid] = (when - event["t_abs"], " ".join(argv[:2]))
        elif event["event"] == "exit" and sid in starts:
            when, name = starts.pop(sid)
            if when < at["entered"]:
                continue
            bounds = (at["started"], at["last"], at["finished"])
            phase = PHASES[sum(when >= b for b in bounds)]
            out[phase].append((event["t_abs"], name))
    return out


def _drop_config(argv: list[str]) -> list[str]:
    """argv without its `-c key=value` pairs (looprail's safe config before every call)."""
    out, skip = [], False
    for arg in argv:
        if not skip and arg == "-c":
            skip = True
            continue
        if not skip:
            out.append(arg)
        skip = False
    return out


def run_once(plans: int, agent_s: float, tree: Path = ROOT, trace: bool = False) -> dict[str, Any]:
    """One `looprail run` of `plans` plans, with the looprail of `tree` (a source tree)."""
    with tempfile.TemporaryDirectory(prefix="looprail-worktree-waves-") as tmp:
        root = Path(tmp)
        folder = project(root, plans)
        env = {
            **os.environ,
            **GIT_ENV,
            "PATH": f"{fake_claude(root, tree)}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
            "FAKE_AGENT_SLEEP": str(agent_s),
            "PYTHONPATH": str(tree),
            **({"GIT_TRACE2_EVENT": str(root / "git-trace.jsonl")} if trace else {}),
        }
        cpu0 = _children_cpu()
        start = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "looprail",
                "run",
                str(folder),
                "--phase",
                "1",
                "--jobs",
                str(plans),
                "--quiet",
            ],
            env=env,
            cwd=tree,  # `-m` puts the current folder first on sys.path: the tree under test
            capture_output=True,
            text=True,
            timeout=300,
        )
        whole = time.perf_counter() - start
        cpu = _children_cpu() - cpu0
        if done.returncode != 0:
            raise SystemExit(f"looprail run failed ({done.returncode}): {done.stderr[-2000:]}")
        for i in range(plans):  # every plan's file is in the main tree (merged back)
            assert (folder / "src" / f"{i + 1:03d}" / "1.py").is_file(), f"plan {i + 1} lost"
        found = marks(folder)
        calls = git_calls(root / "git-trace.jsonl", found.pop("at")) if trace else None
        return {**found, "whole": whole, "cpu": cpu, "git": calls}


def _children_cpu() -> float:
    """CPU seconds of the reaped children (looprail, and what it started and reaped)."""
    t = os.times()
    return t.children_user + t.children_system


def floor(plans: int, agent_s: float) -> float:
    """Wall time of `plans` stand-in processes (the same sleep and start-up) started at once."""
    with tempfile.TemporaryDirectory(prefix="looprail-worktree-floor-") as tmp:
        claude = fake_claude(Path(tmp)) / "claude"
        env = {**os.environ, "FAKE_AGENT_SLEEP": str(agent_s)}
        argv = [str(claude), "-p", "--output-format", "stream-json", "--verbose", "--", "hi"]

        def one(_: int) -> None:
            subprocess.run(argv, env=env, check=True, capture_output=True, cwd=tmp)

        start = time.perf_counter()
        with ThreadPoolExecutor(plans) as pool:
            list(pool.map(one, range(plans)))
        return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=4)
    ap.add_argument("--agent-s", type=float, default=1.5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--against",
        type=Path,
        metavar="TREE",
        help="also measure the looprail of this source tree (e.g. `git archive` of an older "
        "commit), alternately with this one",
    )
    ap.add_argument(
        "--trace",
        action="store_true",
        help="also count the git processes of each phase (GIT_TRACE2_EVENT) and their run time",
    )
    args = ap.parse_args()
    trees = [ROOT, *([args.against.resolve()] if args.against else [])]
    ones: dict[Path, list[dict[str, Any]]] = {t: [] for t in trees}
    many: dict[Path, list[dict[str, Any]]] = {t: [] for t in trees}
    floors = []
    for _ in range(args.repeat):  # alternately: a machine that gets busier hits all alike
        for tree in trees:
            ones[tree].append(run_once(1, args.agent_s, tree, args.trace))
            many[tree].append(run_once(args.plans, args.agent_s, tree, args.trace))
        floors.append(floor(args.plans, args.agent_s) / floor(1, args.agent_s))
    for tree in trees:
        report(args, tree, ones[tree], many[tree], floors)
    if args.against:
        paired(args.plans, many[ROOT], many[trees[1]], trees[1])


def paired(plans: int, this: list[dict[str, Any]], other: list[dict[str, Any]], tree: Path) -> None:
    """This tree's runs over the other tree's, round by round (a round's runs are seconds
    apart, so a machine that gets busier or quieter hits both alike)."""
    print(f"paired, round by round: {plans} plans with this looprail / with {tree}")
    for key, label in (("execute", "execute"), ("cpu", "CPU of the run")):
        ratios = [a[key] / b[key] for a, b in zip(this, other, strict=True)]
        shown = ", ".join(f"{r:.3f}" for r in ratios)
        print(f"  {label}: median {statistics.median(ratios):.3f} ({shown})")


def report(
    args: argparse.Namespace,
    tree: Path,
    ones: list[dict[str, Any]],
    many: list[dict[str, Any]],
    floors: list[float],
) -> None:

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(
        f"{args.plans} one-task plans in one wave at --jobs {args.plans} vs 1 plan; agent calls "
        f"{args.agent_s:g} s (fake claude); median of {args.repeat}; looprail of {tree}"
    )
    for label, runs in (("1 plan", ones), (f"{args.plans} plans", many)):
        print(
            f"  {label:>8}: execute {med(runs, 'execute'):.3f} s (set-up "
            f"{med(runs, 'setup') * 1000:.0f} ms, last task → wave_finished "
            f"{med(runs, 'merge') * 1000:.0f} ms); whole run {med(runs, 'whole'):.3f} s, "
            f"CPU {med(runs, 'cpu'):.3f} s"
        )
        if runs[0]["git"] is not None:
            print(f"  {'':>8}  git processes (median count, median of their summed run time):")
            for phase in PHASES:
                counts = [len(r["git"][phase]) for r in runs]
                spent = [sum(t for t, _ in r["git"][phase]) for r in runs]
                names = ", ".join(name for _, name in runs[-1]["git"][phase])
                print(
                    f"  {'':>8}    {phase:>6}: {statistics.median(counts):g} calls, "
                    f"{statistics.median(spent) * 1000:.0f} ms ({names})"
                )
    one = med(ones, "execute")
    print(
        f"  floor: {args.plans} stand-ins started at once by hand take "
        f"{statistics.median(floors):.3f}x one alone (the CPUs they share)"
    )
    print(
        f"ratio {med(many, 'execute') / one:.3f} (execute of {args.plans} plans / execute of 1 "
        "plan; goal <= 1.15)"
    )
    print(f"whole-run ratio {med(many, 'whole') / med(ones, 'whole'):.3f}")


if __name__ == "__main__":
    main()
