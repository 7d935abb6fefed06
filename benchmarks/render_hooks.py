"""Wall time of `looprail loop render-hooks plan:pre --raw` over the 44 reference capabilities,
as a host calls it: a whole new process each time, against the reference implementation
(`node $LOOPRAIL_REFERENCE loop render-hooks plan:pre --raw`) measured in the same run.

Four looprail figures:
- warm: nothing changed since the last call (the call is replayed from its memo,
  `looprail/cli/render_memo.py`);
- warm, no memo: the set is cached but this call has no memo (a host's first call at a point:
  the set is read from its cache entry and the hooks resolved);
- cold, one manifest changed: the first call after one `capability.json` got new bytes (a new
  stat and a new content hash, so the compiled registry is rebuilt and that one manifest is
  validated; the other 43 verdicts come from the validation cache);
- cold, all changed: every manifest got new bytes (44 validations, one registry build).

Each figure is the median of `--runs` calls (the calls of every kind are interleaved, so a
load spike on a shared machine hits them alike), wall and CPU (user+sys of the child), printed
with its ratios to the reference's medians. Without LOOPRAIL_REFERENCE the reference columns
are skipped with a note; `python -c pass` (the floor no Python CLI can beat) is always
measured.

`--baseline` measures the same three figures for an older looprail in the same run (its own
cache folder, first on PYTHONPATH): a folder holding a `looprail/` package, or a git commit of
this repository (exported with `git archive`); the default is the commit before goal 5's
light validation (`PRE_LIGHT`). `--baseline none` skips it.

    LOOPRAIL_REFERENCE=.../gsd-tools.cjs python benchmarks/render_hooks.py [--runs 9]
        [--baseline PRE_LIGHT|COMMIT|PATH|none]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CAPS = REPO.parent / "shared" / "conformance" / "gsd-capabilities"
# The last commit before a changed manifest was validated without pydantic (issue 16, goal 5).
PRE_LIGHT = "443118a95ca7634b8bb094af03a6afcdb217178b"


def once(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall ms, CPU ms) of one call: CPU is user+sys of the child, the steadier figure on a
    shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", default="PRE_LIGHT")
    args = parser.parse_args()
    if not CAPS.is_dir():
        sys.exit(f"needs the reference capabilities at {CAPS}")
    reference = os.environ.get("LOOPRAIL_REFERENCE")
    with tempfile.TemporaryDirectory(prefix="looprail-render-") as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(tmp) / "cache"), HOME=tmp)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have .pyc files; so should we
        env.pop("LOOPRAIL_NO_CACHE", None)
        env.pop("LOOPRAIL_CACHE_DIR", None)
        caps = Path(tmp) / "caps"
        shutil.copytree(CAPS, caps)
        manifests = sorted(caps.glob("*/capability.json"))
        original = {m: m.read_text() for m in manifests}
        script = Path(sys.executable).with_name("looprail")
        if script.exists():  # the console script, as a host would call it
            cmd = [str(script)]
        else:
            cmd = [sys.executable, "-c", "from looprail.cli import console; console()"]
        render = ["loop", "render-hooks", "plan:pre", "--raw", "--capabilities", str(caps)]
        cmd += render
        baseline = None if args.baseline == "none" else args.baseline
        if baseline is not None:
            path = Path(baseline)
            if not (path / "looprail").is_dir():
                commit = PRE_LIGHT if baseline == "PRE_LIGHT" else baseline
                path = Path(tmp) / "baseline"
                path.mkdir()
                archive = subprocess.run(
                    ["git", "-C", str(REPO), "archive", commit, "looprail"], capture_output=True
                )
                if archive.returncode:
                    sys.exit(f"cannot export baseline {commit} (use --baseline none or a folder)")
                subprocess.run(["tar", "-x", "-C", str(path)], input=archive.stdout, check=True)
                baseline = f"{baseline} ({commit[:10]})"
            base_env = dict(env, PYTHONPATH=str(path.resolve()))
            base_env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache-baseline")
            base_cmd = cmd  # the same launcher: the baseline package wins on PYTHONPATH
        project = Path(tmp) / "project"
        (project / ".planning").mkdir(parents=True)
        (project / ".planning" / "config.json").write_text("{}")
        node = ["node", reference or "", "loop", "render-hooks", "plan:pre", "--raw"]
        edits = 0

        def change(which: list[Path]) -> None:
            # New bytes every time (trailing spaces: same JSON, a new content hash), then past
            # the racy-clean margin, as a real edit is.
            nonlocal edits
            edits += 1
            for m in which:
                m.write_text(original[m] + " " * edits)
            time.sleep(0.06)

        once(cmd, env, tmp)  # fill the caches, warm the OS file cache and the .pyc files
        once(cmd, env, tmp)
        if baseline is not None:
            once(base_cmd, base_env, tmp)
            once(base_cmd, base_env, tmp)
        if reference:
            once(node, env, str(project))
        rows: dict[str, list[tuple[float, float]]] = {
            "floor": [],
            "warm": [],
            "nomemo": [],
            "one": [],
            "all": [],
            "base-warm": [],
            "base-one": [],
            "base-all": [],
            "ref": [],
        }
        for _ in range(args.runs):
            rows["floor"].append(once([sys.executable, "-c", "pass"], env, tmp))
            once(cmd, env, tmp)  # this state's memo (the cold call before had no entry to key it)
            rows["warm"].append(once(cmd, env, tmp))
            for memo in (Path(tmp) / "cache" / "looprail").glob("render-*.bin"):
                memo.unlink()
            rows["nomemo"].append(once(cmd, env, tmp))
            once(cmd, env, tmp)  # the memo again, for the next warm call
            if baseline is not None:
                rows["base-warm"].append(once(base_cmd, base_env, tmp))
            change(manifests[:1])  # each version's first call after the edit is its cold one
            rows["one"].append(once(cmd, env, tmp))
            if baseline is not None:
                rows["base-one"].append(once(base_cmd, base_env, tmp))
            change(manifests)
            rows["all"].append(once(cmd, env, tmp))
            if baseline is not None:
                rows["base-all"].append(once(base_cmd, base_env, tmp))
            if reference:
                rows["ref"].append(once(node, env, str(project)))
    wall = {k: statistics.median(w for w, _ in v) for k, v in rows.items() if v}
    cpu = {k: statistics.median(c for _, c in v) for k, v in rows.items() if v}
    labels = {
        "floor": "python -c pass (floor)",
        "warm": "render-hooks, warm",
        "nomemo": "render-hooks, warm, no memo",
        "one": "render-hooks, cold (one manifest changed)",
        "all": "render-hooks, cold (all 44 changed)",
        "base-warm": "baseline, warm",
        "base-one": "baseline, cold (one manifest changed)",
        "base-all": "baseline, cold (all 44 changed)",
        "ref": "reference (node), same run",
    }
    if baseline is not None:
        print(f"baseline: {baseline}")
    ref = "ref" in wall
    for key, label in labels.items():
        if key not in wall:
            continue
        line = f"{label:42s} wall {wall[key]:7.1f} ms  CPU {cpu[key]:7.1f} ms"
        if ref and key != "ref":
            goal = "  (goal <= 0.50)" if key == "one" else ""
            ratio_wall, ratio_cpu = wall[key] / wall["ref"], cpu[key] / cpu["ref"]
            line += f"   {ratio_wall:5.2f}x ref wall, {ratio_cpu:5.2f}x ref CPU{goal}"
        print(line)
    if not ref:
        print("reference columns skipped: LOOPRAIL_REFERENCE is not set")
    if baseline is not None:
        print(
            "this / baseline: "
            + ", ".join(
                f"{k} wall {wall[k] / wall['base-' + k]:.2f}x CPU {cpu[k] / cpu['base-' + k]:.2f}x"
                for k in ("warm", "one", "all")
            )
        )
    print(
        f"warm / floor {wall['warm'] / wall['floor']:.2f}x wall, "
        f"warm without a memo / floor {wall['nomemo'] / wall['floor']:.2f}x wall   "
        f"(medians of {args.runs} calls each, interleaved)"
    )


if __name__ == "__main__":
    main()
