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

The interpreter is a large part of the figure, and CPython builds differ: a build with a
shared libpython and no profile-guided optimisation (pyenv's default) runs the same imports
slower than a distribution's build (Debian's python3, linked statically). `--python PATH` (any
number of times) measures this tree under another interpreter too (its floor and the three
figures, with a cache folder of its own), in the same run and against the same reference calls.

looprail is measured as a user has it: installed (`pip install --no-deps --target` into a
`site-packages` folder first on PYTHONPATH, its modules compiled), so the code stamp of the
one cache is the installed package's (`hooks/compiled.py`, `code_stamp`). `--checkout`
measures this working tree as it is instead, where every module's stat is part of the stamp.

`--baseline` measures the same three figures for an older looprail in the same run (its own
cache folder, first on PYTHONPATH): a folder holding a `looprail/` package, or a git commit of
this repository (exported with `git archive`). The default, none, skips it.

    LOOPRAIL_REFERENCE=.../gsd-tools.cjs python benchmarks/render_hooks.py [--runs 9]
        [--baseline COMMIT|PATH|none] [--checkout] [--python PATH ...]
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
from typing import NamedTuple

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


class Subject(NamedTuple):
    """One looprail measured: how it is started, with what environment (its own cache folder,
    its package first on PYTHONPATH), and which interpreter's `-c pass` is its floor."""

    label: str
    cmd: list[str]
    env: dict[str, str]
    python: str


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--baseline", default="none")
    parser.add_argument("--checkout", action="store_true", help="this working tree as it is")
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="PATH",
        help="also measure this tree under this interpreter, in the same run (one that has "
        "looprail's dependencies, such as another venv's python)",
    )
    args = parser.parse_args()
    if not CAPS.is_dir():
        sys.exit(f"needs the reference capabilities at {CAPS}")
    reference = os.environ.get("LOOPRAIL_REFERENCE")
    with tempfile.TemporaryDirectory(prefix="looprail-render-") as folder:
        tmp = Path(folder)
        env = dict(os.environ, HOME=folder)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have .pyc files; so should we
        env.pop("LOOPRAIL_NO_CACHE", None)
        env.pop("LOOPRAIL_CACHE_DIR", None)
        caps = tmp / "caps"
        shutil.copytree(CAPS, caps)
        render = ["loop", "render-hooks", "plan:pre", "--raw", "--capabilities", str(caps)]
        package = None if args.checkout else install(tmp / "site-packages")
        subjects = {"": subject("", sys.executable, package, render, env, tmp)}
        for python in args.python:
            subjects[python] = subject(f", {python}", python, package, render, env, tmp)
        if args.baseline != "none":
            subjects["base"] = subject(
                " (baseline)", sys.executable, export(args.baseline, tmp), render, env, tmp
            )
        project = tmp / "project"
        (project / ".planning").mkdir(parents=True)
        (project / ".planning" / "config.json").write_text("{}")
        node = ["node", reference or "", "loop", "render-hooks", "plan:pre", "--raw"]
        calls = {"ref": (node, env, str(project))} if reference else {}
        rows = measure(args.runs, subjects, sorted(caps.glob("*/capability.json")), calls)
        this = subjects[""]
        once(this.cmd, this.env, folder)  # the set cached for the last edit: the next call is warm
        warm_modules = warm_imports(render, this.env, folder)
    report(args, subjects, rows, warm_modules)


def subject(
    label: str, python: str, package: str | None, render: list[str], env: dict[str, str], tmp: Path
) -> Subject:
    """A looprail started by `python`'s console script, importing `package` (None: the
    checkout), with a cache folder of its own."""
    own = dict(env, XDG_CACHE_HOME=str(tmp / f"cache-{len(list(tmp.glob('cache-*')))}"))
    Path(own["XDG_CACHE_HOME"]).mkdir()
    if package is not None:
        own["PYTHONPATH"] = package
    return Subject(label, [*console_script(python), *render], own, python)


def export(baseline: str, tmp: Path) -> str:
    """The folder holding the baseline's `looprail/` package: `baseline` itself, or a git
    commit of this repository exported with `git archive`."""
    if (Path(baseline) / "looprail").is_dir():
        return str(Path(baseline).resolve())
    path = tmp / "baseline"
    path.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", baseline, "looprail"], capture_output=True
    )
    if archive.returncode:
        sys.exit(f"cannot export baseline {baseline} (use --baseline none or a folder)")
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive.stdout, check=True)
    return str(path)


def measure(
    runs: int,
    subjects: dict[str, Subject],
    manifests: list[Path],
    calls: dict[str, tuple[list[str], dict[str, str], str]],
) -> dict[str, list[tuple[float, float]]]:
    """Each subject's floor, warm call, and first calls after one and after every manifest got
    new bytes, and each of `calls` (the reference) once a round: `runs` rounds, every kind of
    call interleaved, so a load spike on a shared machine hits them alike."""
    original = {m: m.read_text() for m in manifests}
    cwd = str(manifests[0].parent.parent.parent)
    for s in subjects.values():  # fill the caches, warm the OS file cache and the .pyc files
        once(s.cmd, s.env, cwd)
        once(s.cmd, s.env, cwd)
    for cmd, env, where in calls.values():
        once(cmd, env, where)
    rows: dict[str, list[tuple[float, float]]] = {}
    for round_ in range(1, runs + 1):
        for key, (cmd, env, where) in calls.items():
            rows.setdefault(key, []).append(once(cmd, env, where))
        for key, s in subjects.items():
            rows.setdefault(f"{key}floor", []).append(once([s.python, "-c", "pass"], s.env, cwd))
            once(s.cmd, s.env, cwd)  # the set cached again (the cold call before may not have)
            rows.setdefault(f"{key}warm", []).append(once(s.cmd, s.env, cwd))
        for kind, which in (("one", manifests[:1]), ("all", manifests)):
            # New bytes every time (trailing spaces: same JSON, a new content hash), then past
            # the racy-clean margin, as a real edit is; each subject's next call is its cold one.
            for m in which:
                m.write_text(original[m] + " " * (2 * round_ + (kind == "all")))
            time.sleep(0.06)
            for key, s in subjects.items():
                rows.setdefault(f"{key}{kind}", []).append(once(s.cmd, s.env, cwd))
    return rows


def report(
    args: argparse.Namespace,
    subjects: dict[str, Subject],
    rows: dict[str, list[tuple[float, float]]],
    warm_modules: list[str],
) -> None:
    wall = {k: statistics.median(w for w, _ in v) for k, v in rows.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in rows.items()}
    print("looprail: " + ("this working tree" if args.checkout else "installed (site-packages)"))
    if "base" in subjects:
        print(f"baseline: {args.baseline}")
    kinds = {
        "floor": ("python -c pass", ""),
        "warm": ("render-hooks, warm", "  (goal <= 0.25)"),
        "one": ("render-hooks, cold (one manifest changed)", "  (goal <= 1.00)"),
        "all": ("render-hooks, cold (all 44 changed)", ""),
    }
    ref = "ref" in wall
    width = max(len(label + s.label) for label, _ in kinds.values() for s in subjects.values())
    for key, s in subjects.items():
        for kind, (label, goal) in kinds.items():
            name = f"{label}{s.label}"
            line = f"{name:{width}s} wall {wall[key + kind]:7.1f} ms  CPU {cpu[key + kind]:7.1f} ms"
            if ref:
                ratio_wall, ratio_cpu = wall[key + kind] / wall["ref"], cpu[key + kind] / cpu["ref"]
                line += f"   {ratio_wall:5.2f}x ref wall, {ratio_cpu:5.2f}x ref CPU"
                line += "" if key == "base" else goal
            print(line)
    if ref:
        name = "reference (node), same run"
        print(f"{name:{width}s} wall {wall['ref']:7.1f} ms  CPU {cpu['ref']:7.1f} ms")
    else:
        print("reference columns skipped: LOOPRAIL_REFERENCE is not set")
    if "base" in subjects:
        print(
            "this / baseline: "
            + ", ".join(
                f"{k} wall {wall[k] / wall['base' + k]:.2f}x CPU {cpu[k] / cpu['base' + k]:.2f}x"
                for k in ("warm", "one", "all")
            )
        )
    ratio = wall["warm"] / wall["floor"]
    print(f"warm / floor {ratio:.2f}x wall   (medians of {args.runs} calls each, interleaved)")
    compiles, modules = warm_modules[0], warm_modules[1:]
    print(f"a warm call compiles {compiles} source strings (`compile()`)")
    print(f"a warm call imports {len(modules)} modules beyond `python -c pass`:")
    for group in _grouped(modules):
        print(f"  {group}")


def console_script(python: str) -> list[str]:
    """How a host starts looprail under `python`: the `looprail` console script beside it (as
    a host would call it), else the same entry through `-c`. Either way the installed copy on
    PYTHONPATH is the one imported."""
    script = Path(python).with_name("looprail")
    if script.exists():
        return [str(script)]
    return [python, "-c", "from looprail.cli import console; console()"]


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
