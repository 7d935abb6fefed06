"""Wall time of `looprail loop render-hooks plan:pre --raw` over the 44 reference capabilities,
as a host calls it: a whole new process each time, against the reference implementation
(`node $LOOPRAIL_REFERENCE loop render-hooks plan:pre --raw`) measured in the same run.

Three looprail figures (goals: warm <= 0.25x the reference, one manifest changed <= 1.0x):
- warm: nothing changed since the last call (the capability set is read from its cache entry,
  `looprail/hooks/compiled.py`, and the hooks resolved);
- cold, one manifest changed: the first call after one `capability.json` got new bytes (the
  set is rebuilt: every manifest is read and validated again);
- cold, all changed: every manifest got new bytes.

It also prints what a warm call imports (the modules a fresh interpreter holds after the call
and `python -c pass` does not: the figure the retired import budget of the start path was
about, now read here rather than enforced by a test) and how many strings it compiles (0; a
string annotation read at run time is compiled into a `typing.ForwardRef`).

Each figure is the median of `--runs` calls (the calls of every kind are interleaved, so a
load spike on a shared machine hits them alike), wall and CPU (user+sys of the child), printed
with its ratios to the reference's medians. Without LOOPRAIL_REFERENCE the reference columns
are skipped with a note; `python -c pass` (the floor no Python CLI can beat) is always
measured.

looprail is measured as a user has it: installed (`pip install --no-deps --target` into a
`site-packages` folder first on PYTHONPATH, its modules compiled), so the code stamp of the
one cache is the installed package's (`hooks/compiled.py`, `code_stamp`). `--checkout`
measures this working tree as it is instead, where every module's stat is part of the stamp.

`--baseline` measures the same three figures for an older looprail in the same run (its own
cache folder, first on PYTHONPATH): a folder holding a `looprail/` package, or a git commit of
this repository (exported with `git archive`). The default, none, skips it.

    LOOPRAIL_REFERENCE=.../gsd-tools.cjs python benchmarks/render_hooks.py [--runs 9]
        [--baseline COMMIT|PATH|none] [--checkout]
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
# What a fresh interpreter has loaded after `ARGV` (the `looprail` console script's `main`),
# and how many times it called `compile()` (a string annotation read at run time, as a named
# tuple's under `from __future__ import annotations`, is compiled into a `typing.ForwardRef`;
# the first call also builds every AST node type).
MODULES = (
    "import builtins, sys\n"
    "before = set(sys.modules)\n"
    "calls, real = [], builtins.compile\n"
    "builtins.compile = lambda *a, **k: calls.append(1) or real(*a, **k)\n"
    "from looprail.cli import main\n"
    "main(sys.argv[1:])\n"
    "print(len(calls), ' '.join(sorted(set(sys.modules) - before)), file=sys.stderr)\n"
)


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
    parser.add_argument("--baseline", default="none")
    parser.add_argument("--checkout", action="store_true", help="this working tree as it is")
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
        if not args.checkout:
            env["PYTHONPATH"] = install(Path(tmp) / "site-packages")
        baseline = None if args.baseline == "none" else args.baseline
        if baseline is not None:
            path = Path(baseline)
            if not (path / "looprail").is_dir():
                commit = baseline
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
            "one": [],
            "all": [],
            "base-warm": [],
            "base-one": [],
            "base-all": [],
            "ref": [],
        }
        for _ in range(args.runs):
            rows["floor"].append(once([sys.executable, "-c", "pass"], env, tmp))
            once(cmd, env, tmp)  # the set cached again (the cold call before may not have)
            rows["warm"].append(once(cmd, env, tmp))
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
        once(cmd, env, tmp)  # the set cached for the edited manifests
        warm_modules = warm_imports(render, env, tmp)
    wall = {k: statistics.median(w for w, _ in v) for k, v in rows.items() if v}
    cpu = {k: statistics.median(c for _, c in v) for k, v in rows.items() if v}
    labels = {
        "floor": "python -c pass (floor)",
        "warm": "render-hooks, warm",
        "one": "render-hooks, cold (one manifest changed)",
        "all": "render-hooks, cold (all 44 changed)",
        "base-warm": "baseline, warm",
        "base-one": "baseline, cold (one manifest changed)",
        "base-all": "baseline, cold (all 44 changed)",
        "ref": "reference (node), same run",
    }
    print("looprail: " + ("this working tree" if args.checkout else "installed (site-packages)"))
    if baseline is not None:
        print(f"baseline: {baseline}")
    ref = "ref" in wall
    for key, label in labels.items():
        if key not in wall:
            continue
        line = f"{label:42s} wall {wall[key]:7.1f} ms  CPU {cpu[key]:7.1f} ms"
        if ref and key != "ref":
            goal = {"warm": "  (goal <= 0.25)", "one": "  (goal <= 1.00)"}.get(key, "")
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
        f"warm / floor {wall['warm'] / wall['floor']:.2f}x wall   "
        f"(medians of {args.runs} calls each, interleaved)"
    )
    compiles, warm_modules = warm_modules[0], warm_modules[1:]
    print(f"a warm call compiles {compiles} source strings (`compile()`)")
    print(f"a warm call imports {len(warm_modules)} modules beyond `python -c pass`:")
    for group in _grouped(warm_modules):
        print(f"  {group}")


def install(target: Path) -> str:
    """This repository installed into `target` (a `site-packages` folder), as pip installs it
    for a user: the package built and copied, its modules compiled. Returns `target`."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(REPO),
        ],
        check=True,
    )
    return str(target)


def warm_imports(argv: list[str], env: dict[str, str], cwd: str) -> list[str]:
    """How many times a warm `looprail ARGV` call compiles a string, then the modules it loads
    beyond what the interpreter starts with."""
    out = subprocess.run(
        [sys.executable, "-c", MODULES, *argv], env=env, cwd=cwd, capture_output=True, text=True
    )
    return out.stderr.split()


def _grouped(modules: list[str]) -> list[str]:
    """One line per top-level package: its name and how many of its modules were loaded
    (looprail's modules each by name)."""
    counts: dict[str, int] = {}
    for name in modules:
        top = name.split(".")[0]
        counts[top] = counts.get(top, 0) + 1
    lines = [f"{top} ({n})" for top, n in sorted(counts.items()) if top != "looprail"]
    own = sorted(m for m in modules if m.split(".")[0] == "looprail")
    return [", ".join(lines), "looprail: " + " ".join(own)]


if __name__ == "__main__":
    main()
