"""Wall time of `looprail loop render-hooks plan:pre --raw` over the 44 reference capabilities,
as a host calls it: a whole new process each time.

Baselines measured in the same run: a bare `python -c pass` (interpreter start, the floor no
Python CLI can beat) and the same command with the registry cache disabled (every call
validates all 44 manifests with pydantic). The reference implementation (Node.js) is quoted at
about 115 ms median on this machine class; the target is at most half of that.

    python benchmarks/render_hooks.py [--runs 40]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CAPS = REPO.parent / "shared" / "conformance" / "gsd-capabilities"
REFERENCE_MS = 115.0


def measure(argv: list[str], runs: int, env: dict[str, str], cwd: str) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    if not CAPS.is_dir():
        sys.exit(f"needs the reference capabilities at {CAPS}")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=str(Path(tmp) / "cache"), HOME=tmp)
        cmd = [
            sys.executable,
            "-c",
            "import sys; from looprail.cli import main; sys.exit(main())",
            "loop",
            "render-hooks",
            "plan:pre",
            "--raw",
            "--capabilities",
            str(CAPS),
        ]
        script = Path(sys.executable).with_name("looprail")
        if script.exists():  # the console script, as a host would call it
            cmd = [str(script), *cmd[3:]]
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have .pyc files; so should we
        measure(cmd, 3, env, tmp)  # warm the cache and the OS file cache
        bare = measure([sys.executable, "-c", "pass"], args.runs, env, tmp)
        warm = measure(cmd, args.runs, env, tmp)
        cold = measure(cmd, max(5, args.runs // 4), dict(env, LOOPRAIL_NO_CACHE="1"), tmp)
        # Cold as a host meets it: the first call after a manifest changed (cache on, a miss).
        caps = Path(tmp) / "caps"
        shutil.copytree(CAPS, caps)
        changed = [*cmd[: cmd.index("--capabilities") + 1], str(caps)]
        manifest = next(caps.glob("*/capability.json"))
        miss = []
        for _ in range(max(5, args.runs // 4)):
            manifest.write_text(manifest.read_text())  # same content, a new stat: a cache miss
            time.sleep(0.06)  # past the racy-clean margin, as a real edit is
            miss += measure(changed, 1, env, tmp)
        ref = None
        if os.environ.get("LOOPRAIL_REFERENCE"):
            project = Path(tmp) / "project"
            (project / ".planning").mkdir(parents=True)
            (project / ".planning" / "config.json").write_text("{}")
            node = ["node", os.environ["LOOPRAIL_REFERENCE"], "loop", "render-hooks", "plan:pre"]
            ref = measure([*node, "--raw"], max(5, args.runs // 4), env, str(project))
    med = {
        name: statistics.median(t)
        for name, t in (("bare", bare), ("warm", warm), ("cold", cold), ("miss", miss))
    }
    print(f"python -c pass (floor)      median {med['bare']:6.1f} ms")
    p90 = sorted(warm)[int(len(warm) * 0.9)]
    print(f"render-hooks, cache warm    median {med['warm']:6.1f} ms   p90 {p90:6.1f} ms")
    print(f"render-hooks, cache off     median {med['cold']:6.1f} ms")
    print(f"warm / floor                {med['warm'] / med['bare']:.2f}x")
    print(f"warm / cache off            {med['warm'] / med['cold']:.2f}x")
    print(f"render-hooks, after a change median {med['miss']:6.1f} ms")
    print(f"warm / reference (115 ms)   {med['warm'] / REFERENCE_MS:.2f}x  (target <= 0.50)")
    if ref is not None:
        reference = statistics.median(ref)
        print(f"reference (node), same run  median {reference:6.1f} ms")
        print(f"after a change / reference  {med['miss'] / reference:.2f}x  (target <= 0.50)")
        print(f"warm / reference            {med['warm'] / reference:.2f}x")


if __name__ == "__main__":
    main()
