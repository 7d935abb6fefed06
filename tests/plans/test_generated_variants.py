"""GSD projects nobody has seen: a generator of realistic variants of what real projects write
(slugged and short plan file names, lettered ids, bare and cross-phase `depends_on`, fenced
YAML and missing frontmatter, `must_haves` as a list or with bad YAML, unknown plan types,
unbalanced code fences, `<feature>` TDD plans, markdown task headings, `<task` in code,
decimal phases) and their mixtures, compared with the reference through
`tests/plans/real_projects.compare`: every plan-index field agrees, or differs only by a
normalisation docs/plans.md documents, and nothing is refused. Skips without
LOOPRAIL_REFERENCE (and node)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.plans import real_projects as rp
from tests.support import REPO, examples

pytestmark = pytest.mark.skipif(
    not (rp.REFERENCE and shutil.which("node")), reason="LOOPRAIL_REFERENCE (and node) needed"
)

ID_FORMS = ("canonical", "slug", "short", "lettered")
DEP_FORMS = ("full", "bare", "padded-off", "qualified", "earlier-done", "earlier-open", "typo")
STYLES = ("frontmatter", "frontmatter", "frontmatter", "none", "fenced")
MUST_HAVES = ("mapping", "list", "bad-escape", "absent")
BODIES = ("tasks", "tasks", "bare-tasks", "feature", "headings", "fence-in-context", "code-task")


@st.composite
def phase_variants(draw) -> dict:
    """A phase (its number possibly decimal), an earlier phase with one finished and one open
    plan, and 1–5 plans, each drawing a name form, dependency forms, a frontmatter style, a
    `must_haves` shape, a type and a body shape."""
    number = draw(st.sampled_from(["03", "04.1", "12"]))
    forms = draw(st.lists(st.sampled_from(ID_FORMS), min_size=1, max_size=5))
    if "short" in forms:  # short names are a whole phase's convention, never mixed
        forms = ["short"] * len(forms)
    plans = []
    for n, form in enumerate(forms, 1):
        plans.append(
            {
                "n": n,
                "form": form,
                "deps": draw(st.lists(st.sampled_from(DEP_FORMS), max_size=2)) if n > 1 else [],
                "style": draw(st.sampled_from(STYLES)),
                "must_haves": draw(st.sampled_from(MUST_HAVES)),
                "type": draw(st.sampled_from(["execute", "execute", "tdd", "verify"])),
                "body": draw(st.sampled_from(BODIES)),
                "autonomous": draw(st.sampled_from([True, True, False, None])),
                "wave": draw(st.sampled_from([None, None, 1, 2])),
                "summary": draw(st.booleans()),
            }
        )
    return {"number": number, "plans": plans}


def plan_id(number: str, p: dict) -> str:
    nn = f"{p['n']:02d}"
    return {
        "canonical": f"{number}-{nn}",
        "slug": f"{number}-{nn}-part-{p['n']}",
        "short": nn,
        "lettered": f"{number}-{nn}A",
    }[p["form"]]


def dep_text(number: str, plans: list[dict], p: dict, form: str, k: int) -> str:
    target = plans[k % (p["n"] - 1)]
    tid = plan_id(number, target)
    return {
        "full": tid,
        "bare": f"{target['n']:02d}",
        "padded-off": f"{number.lstrip('0') or '0'}-{target['n']}",
        "qualified": f"{number}-{target['n']:02d}",
        "earlier-done": "02-01",
        "earlier-open": "02-02",
        "typo": f"{number}-99",
    }[form]


def body(p: dict) -> str:
    task = '<task type="auto">\n<name>t</name>\n<action>do it</action>\n</task>\n'
    objective = f"<objective>\nPlan {p['n']}\n</objective>\n"
    return {
        "tasks": objective + "<tasks>\n" + task + task + "</tasks>\n",
        "bare-tasks": objective + task,
        "feature": objective
        + "<feature>\n<name>f</name>\n<files>a.py</files>\n<behavior>x → y</behavior>\n"
        "<implementation>do</implementation>\n</feature>\n",
        "headings": f"# Plan {p['n']}\n\n### Task 1: one\nDo.\n\n### Task 2: two\nDo.\n",
        "fence-in-context": objective
        + "<context>\n<interfaces>\n```ts\nexport type A = 1;\n</interfaces>\n</context>\n"
        "<tasks>\n" + task.replace("do it", "run:\n```bash\nnpm test\n```\n") + "</tasks>\n",
        "code-task": objective
        + "```xml\n<task>example</task>\n```\n<tasks>\n"
        + task
        + "</tasks>\n",
    }[p["body"]]


def write_variant(root: Path, variant: dict) -> tuple[Path, str]:
    number = variant["number"]
    project = root / "project"
    earlier = project / ".planning" / "phases" / "02-base"
    earlier.mkdir(parents=True)
    for n in (1, 2):
        (earlier / f"02-0{n}-PLAN.md").write_text(
            "---\nwave: 1\n---\n<tasks><task>x</task></tasks>\n"
        )
    (earlier / "02-01-SUMMARY.md").write_text("---\nstatus: complete\n---\n")
    folder = project / ".planning" / "phases" / f"{number}-gen"
    folder.mkdir()
    plans = variant["plans"]
    for p in plans:
        pid = plan_id(number, p)
        deps = [dep_text(number, plans, p, form, k) for k, form in enumerate(p["deps"])]
        keys = [f"depends_on: {json.dumps(deps)}", f"type: {p['type']}"]
        if p["autonomous"] is not None:
            keys.append(f"autonomous: {str(p['autonomous']).lower()}")
        if p["wave"] is not None:
            keys.append(f"wave: {p['wave']}")
        keys.append(
            {
                "mapping": 'must_haves:\n  truths: ["it works"]',
                "list": "must_haves:\n  - it works",
                "bad-escape": 'must_haves:\n  key_links:\n    - pattern: "fetch\\(api"',
                "absent": "",
            }[p["must_haves"]]
        )
        fm = "\n".join(k for k in keys if k) + "\n"
        text = body(p)
        if p["style"] == "frontmatter":
            text = f"---\n{fm}---\n{text}"
        elif p["style"] == "fenced":
            text = f"# Plan {pid}\n\n## Frontmatter\n\n```yaml\n{fm}```\n\n{text}"
        (folder / f"{pid}-PLAN.md").write_text(text)
        if p["summary"]:
            summary = f"{number}-{p['n']:02d}" if p["form"] == "short" else pid
            (folder / f"{summary}-SUMMARY.md").write_text("---\nstatus: complete\n---\n")
    return project, number


@settings(
    max_examples=examples(8),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(variant=phase_variants())
def test_generated_variants_agree_with_the_reference_or_differ_as_documented(variant):
    with tempfile.TemporaryDirectory() as tmp:
        project, number = write_variant(Path(tmp), variant)
        outcome = rp.compare(project, f"{number}-gen", number)
        assert not outcome.refused, outcome.ours
        assert outcome.differs == [], (outcome.differs, outcome.ours, outcome.theirs)
        documented = (REPO / "docs" / "plans.md").read_text()
        assert all(f"`{name}`" in documented for name in outcome.applied)
