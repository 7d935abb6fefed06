"""What `looprail run` does not import (issue 16, fixed cost): no asyncio (python-statemachine is
imported through `looprail.machine.statechart`), no networkx (waves with graphlib), no PyYAML when
the phase's PLAN.md and artifacts are the ones already parsed (`looprail.yamlcache`), no difflib
when no frontmatter key needs a did-you-mean. Each check is a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.run_fixed import idle_project
from tests.support import REPO

NEVER = ("asyncio", "networkx", "graphviz", "rich", "ssl", "difflib")
RUN = """
import sys
sys.path.insert(0, {repo!r})
from looprail.cli import main
code = main(['run', '--phase', '1', '-q'])
print(json.dumps([code, sorted({{m.split('.')[0] for m in sys.modules}} & set({names!r}))]))
"""


def _run(project, names) -> tuple[int, list[str]]:
    code = "import json\n" + RUN.format(repo=str(REPO), names=tuple(names))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    rc, loaded = json.loads(out.stdout.strip().splitlines()[-1])
    return rc, loaded


def test_a_run_imports_no_asyncio_networkx_or_yaml_once_its_files_are_parsed(tmp_path):
    project = idle_project(tmp_path)
    rc, loaded = _run(project, (*NEVER, "yaml"))
    assert rc == 0
    assert loaded == ["yaml"]  # the first run parses the frontmatter (and caches it)
    rc, loaded = _run(project, (*NEVER, "yaml"))
    assert rc == 0 and loaded == []
    # A changed PLAN.md is parsed again (and only then is PyYAML imported).
    plan = next((project / ".planning" / "phases" / "01-bench").glob("*-PLAN.md"))
    plan.write_text(plan.read_text().replace("---\n", "---\nmust_haves: {}\n", 1))
    rc, loaded = _run(project, (*NEVER, "yaml"))
    assert rc == 0 and loaded == ["yaml"]


def test_statemachine_without_asyncio_and_asyncio_still_whole():
    code = (
        "import sys\n"
        "from looprail.machine.statechart import State, StateChart\n"
        "assert 'asyncio' not in sys.modules, 'asyncio imported'\n"
        "class M(StateChart):\n"
        "    a = State(initial=True)\n"
        "    b = State(final=True)\n"
        "    go = a.to(b)\n"
        "    async def on_go(self):\n"
        "        return 42\n"
        "print(M().go())\n"  # an async callback from sync code: the real asyncio, on first use
        "import asyncio, asyncio.subprocess\n"
        "assert type(asyncio) is type(sys), type(asyncio)\n"
        "assert sys.modules['asyncio'] is asyncio and asyncio.__spec__ is not None\n"
        "async def main():\n"
        "    m = M()\n"
        "    await m.activate_initial_state()\n"
        "    return await m.go()\n"
        "print(asyncio.run(main()))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["42", "42"]


def test_asyncio_imported_first_is_left_alone():
    code = (
        "import sys, asyncio\n"
        "real = sys.modules['asyncio']\n"
        "import looprail.machine.statechart, statemachine.callbacks as c\n"
        "assert c.asyncio is real and sys.modules['asyncio'] is real\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "ok", out.stderr
