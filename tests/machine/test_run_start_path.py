"""What `looprail run` does not import: no networkx or graphviz (waves with graphlib), no PyYAML
when the phase's PLAN.md and artifacts are the ones already parsed (`looprail.yamlcache`). Each
check is a fresh interpreter. (The run's fixed-cost target is retired, issue 29: everything else
is imported plainly.)"""

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


def test_a_run_imports_no_networkx_or_yaml_once_its_files_are_parsed(tmp_path):
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
