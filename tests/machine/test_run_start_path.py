"""What `looprail run` does not import: no networkx or graphviz (waves with graphlib), in a
fresh interpreter. (The run's fixed-cost target is retired, issue 29: everything else, PyYAML
included, is imported plainly.)"""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.run_fixed import idle_project
from tests.support import REPO

NEVER = ("networkx", "graphviz")
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


def test_a_run_imports_no_networkx_or_graphviz(tmp_path):
    project = idle_project(tmp_path)
    rc, loaded = _run(project, NEVER)
    assert rc == 0 and loaded == []
    rc, loaded = _run(project, NEVER)  # the capability set cached: the same
    assert rc == 0 and loaded == []
