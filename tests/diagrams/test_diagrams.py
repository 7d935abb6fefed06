"""Diagrams: the networkx model of the compiled loop, hooks and run overlay; DOT / Mermaid text;
SVG / PNG through Graphviz; the committed `diagrams/` folder has not drifted."""

from __future__ import annotations

import itertools
import re
import shutil
import struct

import pytest

from looprail.diagrams import NO_CAPABILITIES, load_graph
from looprail.diagrams.graph import (
    START,
    RunEvent,
    RunTask,
    RunView,
    build_graph,
    children,
    envelopes_for,
    hooks_at,
    point_id,
    transitions,
)
from looprail.diagrams.render import (
    HOOKS_PER_ROW,
    GraphvizMissingError,
    format_for,
    render,
    segments,
    to_dot,
    to_mermaid,
)
from looprail.errors import UsageError
from looprail.hooks.compiled import load_compiled
from looprail.machine.spec import DEFAULT_LOOP
from looprail.points import POINTS
from tests.support import (
    CONFORMANCE,
    GSD_CAPABILITIES,
    REPO,
    feature,
    needs_corpus,
    run_cli,
    write_capability,
    write_config,
    write_exe,
)


def _compiled(tmp_path, *manifests):
    caps = tmp_path / "caps"
    for m in manifests:
        write_capability(caps, m)
    return load_compiled(tmp_path, [caps], env={}, home=tmp_path / "home", use_cache=False)


def _gate(point, *, blocking=True, check=None, when=None):
    gate = {
        "point": point,
        "check": check or {"query": "ui plan-gate"},
        "blocking": blocking,
        "onError": "halt",
    }
    if when:
        gate["when"] = when
    return gate


def _hooked_graph(tmp_path, **build):
    compiled = _compiled(
        tmp_path,
        feature(
            "ui",
            skills=["lint"],
            steps=[
                {
                    "point": "plan:post",
                    "ref": {"skill": "lint"},
                    "produces": [],
                    "consumes": [],
                    "onError": "skip",
                }
            ],
            contributions=[
                {
                    "point": "plan:pre",
                    "into": "planner",
                    "fragment": {"inline": "Use the design system."},
                    "produces": [],
                    "consumes": [],
                }
            ],
            gates=[_gate("plan:post"), _gate("execute:wave:post", blocking=False)],
        ),
    )
    return build_graph(envelopes=envelopes_for(compiled, None), **build)


# --------------------------------------------------------------------------- the model


def test_graph_is_the_compiled_chart_with_its_points():
    graph = build_graph()
    states = [n for n, d in graph.nodes(data=True) if d["kind"] == "state"]
    assert states[:4] == ["idle", "discuss", "plan", "execute"]
    assert set(states) == {
        "idle",
        "discuss",
        "plan",
        "execute",
        "wave_ready",
        "wave_running",
        "waves_done",
        "verify",
        "ship",
        "shipped",
    }
    assert graph.nodes["execute"]["compound"] is True
    assert children(graph, "execute", "state") == ["wave_ready", "wave_running", "waves_done"]
    assert graph.nodes["waves_done"]["final"] and graph.nodes["shipped"]["final"]
    assert graph.nodes["plan"]["role"] == "planner" and graph.nodes["plan"]["artifact"] == "PLAN.md"
    # every spec transition is an edge, with the points it dispatches and the chart's guards
    edges = {(u, v, d["event"]): d for u, v, _, d in transitions(graph)}
    assert len(edges) == len(DEFAULT_LOOP.transitions())
    for t in DEFAULT_LOOP.transitions():
        d = edges[(t.source, t.target, t.event)]
        assert tuple(d["points"]) == t.points
        assert tuple(d["guards"]) == t.guards
    points = [d["point"] for _, d in graph.nodes(data=True) if d["kind"] == "point"]
    assert sorted(points) == sorted(POINTS)
    # the wave points are drawn inside execute, the others outside
    assert graph.nodes[point_id("execute:wave:pre")]["parent"] == "execute"
    assert graph.nodes[point_id("execute:pre")]["parent"] is None
    assert list(graph.successors(START)) == ["idle"]


def test_wave_loop_is_a_cycle_through_the_wave_points():
    segs = {(s.tail, s.head): s for s in segments(build_graph())}
    loop = [
        "wave_ready",
        point_id("execute:wave:pre"),
        "wave_running",
        point_id("execute:wave:post"),
        "wave_ready",
    ]
    for a, b in itertools.pairwise(loop):
        assert (a, b) in segs
    assert segs[(point_id("execute:wave:post"), "wave_ready")].labels == ["[more_waves]"]
    assert segs[(point_id("execute:wave:post"), "waves_done")].labels == ["[else]"]
    assert segs[(point_id("execute:wave:post"), "wave_ready")].back
    # into and out of the compound: drawn to its first child / from its final child, clipped
    into = segs[(point_id("execute:pre"), "wave_ready")]
    assert into.lhead == "execute"
    out = segs[("waves_done", point_id("execute:post"))]
    assert out.ltail == "execute"
    assert out.labels == ["finish_execute", "[waves_finished]"]


def test_hooks_hang_off_their_points_in_dispatch_order(tmp_path):
    graph = _hooked_graph(tmp_path)
    assert graph.graph["hooks_shown"]
    at_plan_post = [graph.nodes[h] for h in hooks_at(graph, "plan:post")]
    assert [(h["hook_kind"], h["cap_id"]) for h in at_plan_post] == [
        ("step", "ui"),
        ("gate", "ui"),
    ]
    assert at_plan_post[0]["summary"] == "skill gsd-lint"
    assert at_plan_post[1]["summary"] == "query ui plan-gate"
    assert at_plan_post[1]["blocking"] is True
    wave_gate = graph.nodes[hooks_at(graph, "execute:wave:post")[0]]
    assert wave_gate["blocking"] is False and wave_gate["parent"] == "execute"
    contribution = graph.nodes[hooks_at(graph, "plan:pre")[0]]
    assert contribution["summary"] == "into planner"
    assert hooks_at(graph, "ship:pre") == []


def test_inactive_hooks_are_not_drawn(tmp_path):
    compiled = _compiled(
        tmp_path,
        feature(
            "sec",
            config={"sec.on": {"type": "boolean", "default": False}},
            gates=[_gate("ship:pre", when="sec.on")],
        ),
    )
    assert hooks_at(build_graph(envelopes=envelopes_for(compiled, None)), "ship:pre") == []
    on = envelopes_for(compiled, {"sec": {"on": True}})
    assert len(hooks_at(build_graph(envelopes=on), "ship:pre")) == 1


def test_failed_capability_with_a_gate_is_drawn_as_a_warning(tmp_path):
    bad = feature("broken", gates=[_gate("ship:pre")])
    bad["version"] = "one"
    compiled = _compiled(tmp_path, bad)
    graph = build_graph(envelopes=envelopes_for(compiled, None))
    (node,) = hooks_at(graph, "ship:pre")
    assert graph.nodes[node]["hook_kind"] == "failed"
    assert graph.nodes[node]["cap_id"] == "broken"
    assert 'style="filled,dashed"' in to_dot(graph)


# --------------------------------------------------------------------------- run overlay


def _halted_run():
    tr = [
        ("begin", ["idle"], ["discuss"]),
        ("finish_discuss", ["discuss"], ["plan"]),
        ("finish_plan", ["plan"], ["execute", "wave_ready"]),
        ("start_wave", ["execute", "wave_ready"], ["execute", "wave_running"]),
        ("finish_wave", ["execute", "wave_running"], ["execute", "waves_done"]),
        ("finish_execute", ["execute", "waves_done"], ["verify"]),
    ]
    events = [RunEvent("transition", data={"event": e, "source": s, "target": t}) for e, s, t in tr]
    events += [
        RunEvent(
            "hook",
            point="ship:pre",
            cap_id="release",
            hook_kind="gate",
            outcome="blocked",
            message="not yet",
            data={"label": "predicate config-equals", "blocking": True, "onError": "halt"},
        ),
        RunEvent("halted", point="ship:pre", cap_id="release", outcome="halted"),
    ]
    return RunView(
        run_id="01ABC",
        phase="1",
        status="halted",
        state=("verify",),
        halt_reason="blocked at ship:pre by gate release: not yet",
        events=tuple(events),
        tasks=(
            RunTask("01-01/T1", "done", "01-01", 1, 1),
            RunTask("01-02/T1", "failed", "01-02", 1, 2),
            RunTask("01-03/T1", "pending", "01-03", 2, 0),
        ),
    )


def test_run_overlay_marks_visited_current_and_the_refusal():
    graph = build_graph(run=_halted_run())
    nodes = graph.nodes
    assert all(nodes[s]["visited"] for s in ("idle", "discuss", "plan", "wave_running", "verify"))
    assert not nodes["ship"]["visited"] and not nodes["wave_ready"]["current"]
    assert nodes["verify"]["current"]
    edges = {d["event"] + ":" + v: d for _, v, _, d in transitions(graph)}
    assert edges["finish_plan:execute"]["visited"]
    assert not edges["finish_wave:wave_ready"]["visited"]
    refused = edges["finish_verify:ship"]
    assert refused["refused"] and refused["refused_by"] == "release"
    # hooks were not asked for, but the one that refused is drawn
    (gate,) = hooks_at(graph, "ship:pre")
    assert nodes[gate]["refused"] and nodes[gate]["outcome"] == "blocked"
    assert nodes[gate]["summary"] == "predicate config-equals"
    assert nodes["halt_note"]["label"].startswith("halted: blocked at ship:pre")
    tasks = {d["task_key"]: d["status"] for _, d in graph.nodes(data=True) if d["kind"] == "task"}
    assert tasks == {"01-01/T1": "done", "01-02/T1": "failed", "01-03/T1": "pending"}


def test_refused_route_is_red_only_up_to_the_refusing_point():
    segs = {(s.tail, s.head): s for s in segments(build_graph(run=_halted_run()))}
    assert segs[("verify", point_id("verify:post"))].refused
    into_gate = segs[(point_id("verify:post"), point_id("ship:pre"))]
    assert into_gate.refused and "✗ refused by release" in into_gate.labels
    assert not segs[(point_id("ship:pre"), "ship")].refused
    dot = to_dot(build_graph(run=_halted_run()))
    assert "#c62828" in dot and "✗ refused by release" in dot
    assert "01-02/T1 (attempt 2)" in dot
    mermaid = to_mermaid(build_graph(run=_halted_run()))
    assert "class verify current" in mermaid
    assert "halt_note" in mermaid and "refusedhook" in mermaid


def test_run_halted_by_a_native_task_hook_draws_without_a_point_node():
    # A native hook blocking `task_call` halts with point "task_call": not one of the 12 points.
    run = RunView(
        run_id="01ABC",
        phase="1",
        status="halted",
        state=("execute", "wave_running"),
        halt_reason="native hook guard at task_call: no",
        events=(
            RunEvent(
                "native_hook", point=None, cap_id="guard", hook_kind="native", outcome="block"
            ),
            RunEvent("halted", point="task_call", cap_id="guard", outcome="halted"),
        ),
    )
    graph = build_graph(run=run)
    assert graph.nodes["halt_note"]["label"] == "halted: native hook guard at task_call: no"
    assert not any(d.get("refused") for _, _, _, d in transitions(graph))
    assert "halt_note" in to_dot(graph) and "halt_note" in to_mermaid(graph)


def test_run_overlay_on_drawn_hooks_marks_outcomes(tmp_path):
    run = RunView(
        run_id="R",
        phase="1",
        status="halted",
        state=("plan",),
        events=(
            RunEvent(
                "transition", data={"event": "begin", "source": ["idle"], "target": ["discuss"]}
            ),
            RunEvent("hook", point="plan:post", cap_id="ui", hook_kind="step", outcome="ok"),
            RunEvent(
                "hook",
                point="plan:post",
                cap_id="ui",
                hook_kind="gate",
                outcome="blocked",
                message="no UI-SPEC",
            ),
            RunEvent("halted", point="plan:post", cap_id="ui"),
        ),
    )
    graph = _hooked_graph(tmp_path, run=run)
    step, gate = (graph.nodes[h] for h in hooks_at(graph, "plan:post"))
    assert step["outcome"] == "ok" and not step.get("refused")
    assert gate["outcome"] == "blocked" and gate["refused"]
    assert len(hooks_at(graph, "plan:post")) == 2  # nothing added: the gate was already drawn


# --------------------------------------------------------------------------- text output


def test_dot_draws_kinds_with_distinct_shapes(tmp_path):
    dot = to_dot(_hooked_graph(tmp_path))
    assert "rankdir=TB" in dot and "compound=true" in dot
    assert "subgraph cluster_execute" in dot
    assert "shape=octagon" in dot and "shape=note" in dot
    assert "lhead=cluster_execute" in dot and "ltail=cluster_execute" in dot
    blocking = next(line for line in dot.splitlines() if "hk_plan_post_1" in line and "[" in line)
    assert "#c62828" in blocking and "octagon" in blocking
    advisory = next(line for line in dot.splitlines() if "hk_execute_wave_post_0 [" in line)
    assert "dashed" in advisory


def test_mermaid_text(tmp_path):
    text = to_mermaid(_hooked_graph(tmp_path))
    lines = text.splitlines()
    assert lines[3] == "flowchart TB"
    assert any(line.strip().startswith("subgraph execute [") for line in lines)
    assert "pt_plan_post -.- hk_plan_post_0" in text
    assert "pt_plan_post -.- hk_plan_post_1" in text
    assert "hk_plan_post_1{{" in text  # gate: hexagon
    assert "hk_plan_pre_0>" in text  # contribution: flag
    assert "class hk_plan_post_1 blocking" in text
    assert "class hk_execute_wave_post_0 advisory" in text
    assert 'pt_execute_wave_post -- "[more_waves]" --> wave_ready' in text
    assert "pt_execute_pre --> execute" in text  # into the subgraph itself


def test_text_output_is_deterministic_and_has_no_absolute_paths(tmp_path):
    project = tmp_path / "proj"
    (project / ".planning").mkdir(parents=True)
    write_config(project, {})
    caps = tmp_path / "caps"
    write_capability(caps, feature("ui", gates=[_gate("plan:post")]))
    graph, _ = load_graph(project, [caps], hooks=True, env={}, home=tmp_path / "h")
    again, _ = load_graph(project, [caps], hooks=True, env={}, home=tmp_path / "h")
    assert to_dot(graph) == to_dot(again)
    assert to_mermaid(graph) == to_mermaid(again)
    for text in (to_dot(graph), to_mermaid(graph)):
        assert str(tmp_path) not in text
        assert "looprail loop · proj" in text


def test_format_from_suffix():
    assert format_for(None, "x.png") == "png"
    assert format_for(None, "x.MMD") == "mermaid"
    assert format_for(None, "x.gv") == "dot"
    assert format_for(None, None) == "svg"
    assert format_for("dot", "x.png") == "dot"
    with pytest.raises(UsageError, match=r"x\.jpg: unknown diagram suffix"):
        format_for(None, "x.jpg")


def test_cli_unknown_suffix_is_a_usage_error_and_writes_nothing(tmp_path):
    r = run_cli("diagram", "-o", str(tmp_path / "x.jpg"), cwd=tmp_path, subprocess=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "unknown diagram suffix" in r.stderr
    assert list(tmp_path.iterdir()) == []
    r = run_cli("diagram", "--format", "dot", "-o", str(tmp_path / "x.jpg"), cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "x.jpg").read_text().startswith("digraph")


def _svg_shape(svg: str) -> tuple[float, float, float]:
    """(width, height, smallest font size) of a Graphviz SVG, all in points."""
    root = re.search(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"', svg)
    assert root, svg[:300]
    sizes = [float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)]
    return float(root[1]), float(root[2]), min(sizes)


def assert_readable(svg: str) -> None:
    """No wider (or taller) than 3:1, and the smallest text at least 10 px when the picture is
    shown 1000 px wide."""
    width, height, smallest = _svg_shape(svg)
    assert max(width / height, height / width) <= 3.0, (width, height)
    assert smallest * 1000 / width >= 10, (smallest, width)


# --------------------------------------------------------------------------- graphviz


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
def test_svg_and_png_through_graphviz():
    graph = build_graph(run=_halted_run())
    svg = render(graph, "svg")
    assert svg.startswith(b"<?xml") and b"<svg" in svg and b"wave running" in svg
    png = render(graph, "png")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert_readable(svg.decode())


@pytest.mark.parametrize("name", ["loop", "hello-loop"])
def test_committed_pictures_are_readable_at_page_width(name):
    svg = (REPO / "diagrams" / f"{name}.svg").read_text()
    assert_readable(svg)
    png = (REPO / "diagrams" / f"{name}.png").read_bytes()
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    assert max(width / height, height / width) <= 3.0, (width, height)
    assert width >= 900, width  # drawn for page width, not scaled up to it


def test_missing_dot_is_one_line_and_text_formats_still_work(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    graph = build_graph()
    with pytest.raises(GraphvizMissingError) as exc:
        render(graph, "svg")
    message = str(exc.value)
    assert "\n" not in message
    assert "apt-get install graphviz" in message and "brew install graphviz" in message
    with pytest.raises(GraphvizMissingError):
        render(graph, "png")
    assert render(graph, "dot").startswith(b"digraph")
    assert b"flowchart TB" in render(graph, "mermaid")


def test_cli_output_that_is_a_folder_is_a_usage_error(tmp_path):
    r = run_cli("diagram", "--format", "dot", "-o", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr == f"looprail: error: {tmp_path}: is a folder, not a file\n"
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_cli_without_dot_on_path(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    r = run_cli("diagram", "--format", "svg", cwd=tmp_path, env=env)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and "apt-get install graphviz" in r.stderr
    assert r.stdout == ""
    r = run_cli("diagram", "--format", "dot", cwd=tmp_path, env=env)
    assert r.returncode == 0 and r.stdout.startswith("digraph")
    r = run_cli("diagram", "-o", str(tmp_path / "loop.mmd"), cwd=tmp_path, env=env)
    assert r.returncode == 0 and "flowchart TB" in (tmp_path / "loop.mmd").read_text()


# --------------------------------------------------------------------------- CLI


def test_cli_default_loop_outside_a_project(tmp_path):
    r = run_cli("diagram", "--format", "mermaid", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "subgraph execute" in r.stdout and "hk_" not in r.stdout
    r = run_cli("diagram", "--hooks", "--format", "dot", cwd=tmp_path)
    assert r.returncode == 1 and "need a project" in r.stderr
    r = run_cli("diagram", str(tmp_path / "nope"), "--format", "dot")
    assert r.returncode == 2 and "no such project folder" in r.stderr


def test_cli_hooks_and_run_of_a_real_halted_run(tmp_path):
    project = tmp_path / "hello"
    shutil.copytree(REPO / "examples" / "hello-loop", project)
    write_config(
        project, {"style": {"contribute": True}, "release": {"gate": True, "allow_ship": False}}
    )
    caps = str(REPO / "examples" / "capabilities")
    r = run_cli("run", str(project), "--phase", "1", "--capabilities", caps, "-q")
    assert r.returncode == 1, r.stderr
    r = run_cli(
        "diagram", str(project), "--hooks", "--run", "latest", "--capabilities", caps,
        "--format", "dot",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    dot = r.stdout
    assert "✗ refused by release-gate" in dot
    assert "✗ blocked" in dot and "config key release.allow_ship is" in dot
    assert "✓ 01-03/T1" in dot  # per-task status inside execute
    assert "style-guide" in dot and "changelog" in dot
    if shutil.which("dot"):
        out = tmp_path / "run.png"
        r = run_cli(
            "diagram", str(project), "--run", "latest", "--capabilities", caps, "-o", str(out)
        )
        assert r.returncode == 0, r.stderr
        assert out.read_bytes().startswith(b"\x89PNG")
        r = run_cli(
            "diagram", str(project), "--hooks", "--run", "latest", "--capabilities", caps,
            "--format", "svg",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert_readable(r.stdout)
    r = run_cli("diagram", str(project), "--run", "NOPE", "--format", "dot")
    assert r.returncode == 1 and "no run 'NOPE'" in r.stderr


def test_cli_run_needs_a_journal(tmp_path):
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    r = run_cli("diagram", str(project), "--run", "latest", "--format", "dot")
    assert r.returncode == 1
    assert "no journal yet" in r.stderr and r.stderr.count("\n") == 1


# --------------------------------------------------------------------------- drift


def test_committed_diagrams_are_up_to_date():
    """`diagrams/*.dot`, `*.mmd` and README.md are what `looprail diagram --regenerate-docs`
    draws now. (SVG/PNG bytes vary across Graphviz versions and are not compared.)"""
    from looprail.diagrams.regenerate import texts

    folder = REPO / "diagrams"
    stale = [
        name
        for name, text in texts().items()
        if not (folder / name).is_file() or (folder / name).read_text() != text
    ]
    assert not stale, (
        f"diagrams/ is out of date ({', '.join(stale)}): run `looprail diagram --regenerate-docs`"
    )
    for name in ("loop", "hello-loop"):
        assert (folder / f"{name}.svg").is_file() and (folder / f"{name}.png").is_file()


def test_regenerate_writes_every_file(tmp_path):
    from looprail.diagrams.regenerate import regenerate

    written = regenerate(tmp_path, pictures=shutil.which("dot") is not None)
    names = {p.name for p in written}
    assert {"loop.dot", "loop.mmd", "hello-loop.dot", "hello-loop.mmd", "README.md"} <= names
    assert "```mermaid" in (tmp_path / "README.md").read_text()


# --------------------------------------------------------------------------- readable (issue 39)


def _hooks_per_rank(dot: str) -> list[int]:
    """How many hook nodes each `rank=same` group of a DOT source holds."""
    groups = re.findall(r"\{\s*rank=same(.*?)\}", dot, re.DOTALL)
    return [len(re.findall(r"^\s*hk_\w+ \[", g, re.MULTILINE)) for g in groups]


@needs_corpus
def test_the_reference_capabilities_wrap_four_hooks_to_a_row(tmp_path):
    project = shutil.copytree(
        CONFORMANCE / "real-projects" / "itsvetkov1+XtraSkill", tmp_path / "p"
    )
    caps = ("--capabilities", str(GSD_CAPABILITIES))
    dot = run_cli("diagram", str(project), "--hooks", *caps, "--format", "dot")
    assert dot.returncode == 0, dot.stderr
    per_rank = _hooks_per_rank(dot.stdout)
    at_plan_pre = set(re.findall(r"^\s*(hk_plan_pre_\d+) \[", dot.stdout, re.MULTILINE))
    assert len(at_plan_pre) > 2 * HOOKS_PER_ROW  # ten of the 44 fire at plan:pre…
    assert max(per_rank) == HOOKS_PER_ROW  # …drawn in rows of at most four
    if shutil.which("dot") is None:
        return
    out = tmp_path / "hooks.png"
    assert run_cli("diagram", str(project), "--hooks", *caps, "-o", str(out)).returncode == 0
    width, height = struct.unpack(">II", out.read_bytes()[16:24])
    assert width <= 1920 < height, (width, height)  # one screen wide, at its natural size


def test_hooks_with_no_capabilities_says_why_on_stderr_and_in_the_picture(tmp_path):
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    done = run_cli(
        "diagram", str(project), "--hooks", "--format", "dot", env={"HOME": str(tmp_path)}
    )
    assert done.returncode == 0
    assert done.stderr == f"looprail: warning: {NO_CAPABILITIES}\n"
    assert "no capabilities loaded" in done.stdout and "hk_" not in done.stdout
    assert "box: step" not in done.stdout  # no legend for hooks that are not there


def test_a_run_refused_at_verify_pre_hangs_its_note_on_the_refusing_gate(tmp_path):
    project = shutil.copytree(REPO / "examples" / "hello-loop", tmp_path / "hello")
    caps = shutil.copytree(REPO / "examples" / "capabilities", tmp_path / "caps")
    gate = {"point": "verify:pre", "check": {"query": "coverage"}, "blocking": True}
    write_capability(caps, feature("coverage-gate", gates=[{**gate, "onError": "halt"}]))
    write_exe(
        project / ".looprail" / "checks" / "coverage",
        'echo \'{"block": true, "message": "REQ-01 has no test"}\'\n',
    )
    run = run_cli("run", str(project), "--phase", "1", "--capabilities", str(caps), "-q")
    assert run.returncode == 1 and "refused at verify:pre" in run.stderr, run.stderr
    dot = run_cli("diagram", str(project), "--run", "latest", "--format", "dot").stdout
    (edge,) = re.findall(r"^\s*(\S+) -> halt_note", dot, re.MULTILINE)
    assert edge.startswith("hk_verify_pre_"), edge  # beside the gate, not on a state
    assert "coverage-gate" in dot.split(f"{edge} [", 1)[1].split("]", 1)[0]
