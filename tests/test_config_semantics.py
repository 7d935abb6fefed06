"""`.planning/config.json` as the reference reads it (issues 11, 12, 18): typed keys with declared
defaults, JSON.parse semantics for the file itself, a bounded reader that refuses FIFOs and
devices, strict loading for run/lint/check, byte-identical `render-hooks --raw`, engine ranges,
withheld invalid ids and the missing-point wording. Everything here goes through the CLI."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time

import pytest

from looprail.config import (
    effective_value,
    js_dumps,
    js_number,
    load_project_config,
    load_project_config_strict,
    parse_json_js,
)
from looprail.errors import ConfigError
from tests.support import CONFORMANCE, GSD_CAPABILITIES, feature, run_cli, write_capability

TYPED = {
    "t.flag": {"type": "boolean", "default": True, "description": "d"},
    "t.off": {"type": "boolean", "default": False, "description": "d"},
    "t.level": {"type": "number", "default": 1, "description": "d"},
    "t.block": {"type": "enum", "values": ["high", "low"], "default": "high", "description": "d"},
    "t.name": {"type": "string", "default": "", "description": "d"},
}


IO = {"produces": [], "consumes": [], "onError": "skip"}


def _caps(tmp_path):
    """One capability with typed keys: a step gated by `t.flag`, a contribution carrying
    configValues, and a gate gated by `t.off`; another activated by `t.off`."""
    caps = tmp_path / "caps"
    write_capability(
        caps,
        feature(
            "typed",
            skills=["s"],
            config=TYPED,
            steps=[{"point": "plan:pre", "ref": {"skill": "s"}, "when": "t.flag", **IO}],
            contributions=[
                {
                    "point": "plan:pre",
                    "into": "planner",
                    "fragment": {"inline": "x"},
                    "configValues": {"level": "t.level", "block": "t.block", "name": "t.name"},
                    "produces": [],
                    "consumes": [],
                }
            ],
        ),
    )
    write_capability(
        caps,
        feature(
            "gated",
            skills=["g"],
            activationKey="g.on",
            config={"g.on": {"type": "boolean", "default": False, "description": "d"}},
            steps=[{"point": "plan:pre", "ref": {"skill": "g"}, **IO}],
        ),
    )
    return caps


def _render(project, caps, point="plan:pre", *extra):
    from looprail.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = ["loop", "render-hooks", point, "--project", str(project), "--capabilities", str(caps)]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, *extra])
    return code, out.getvalue(), err.getvalue()


def _write(project, text: str | bytes):
    p = project / ".planning" / "config.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def _envelope(project, caps):
    code, out, err = _render(project, caps, "plan:pre", "--raw")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    "config, flag, gated, values",
    [
        ({}, True, False, None),
        # Wrong types, null, out-of-enum: the declared default, then truthiness.
        ({"t": {"flag": 0}, "g": {"on": 1}}, True, False, None),
        ({"t": {"flag": None}, "g": {"on": "yes"}}, True, False, None),
        ({"t": {"flag": False}, "g": {"on": True}}, False, True, None),
        ({"t": {"level": "2", "block": "HIGH", "name": 3}}, True, False, None),
        (
            {"t": {"level": 2.5, "block": "low", "name": "n"}},
            True,
            False,
            {"level": 2.5, "block": "low", "name": "n"},
        ),
        ('{"t": {"level": 1e400}}', True, False, {"level": None}),  # Infinity prints as null
        ({"t": {"level": 9007199254740993}}, True, False, {"level": 9007199254740992}),
        # A flat dotted key is not a path, and a non-object on the way is absent.
        ({"t.flag": False, "g.on": True}, True, False, None),
        ({"t": [False]}, True, False, None),
    ],
)
def test_typed_keys_through_the_cli(tmp_path, config, flag, gated, values):
    caps = _caps(tmp_path)
    project = tmp_path / "p"
    _write(project, config if isinstance(config, str) else json.dumps(config))
    env = _envelope(project, caps)
    ids = [(h["capId"], h["kind"]) for h in env["activeHooks"]]
    assert (("typed", "step") in ids) is flag
    assert (("gated", "step") in ids) is gated
    contribution = next(h for h in env["activeHooks"] if h["kind"] == "contribution")
    assert contribution["configValues"] == {
        "level": 1,
        "block": "high",
        "name": "",
        **(values or {}),
    }


def test_effective_value_rules():
    schema = {k: {kk: vv for kk, vv in v.items() if kk != "description"} for k, v in TYPED.items()}
    assert effective_value("t.flag", {"t": {"flag": 0}}, schema) is True
    assert effective_value("t.block", {"t": {"block": "low"}}, schema) == "low"
    assert effective_value("t.block", {"t": {"block": "LOW"}}, schema) == "high"
    # Undeclared keys are the raw value; arrays are objects in JavaScript.
    assert effective_value("u.x", {"u": {"x": 0}}, schema) == 0
    assert effective_value("u.1", {"u": ["a", "b"]}, schema) == "b"
    assert effective_value("u.length", {"u": ["a", "b"]}, schema) == 2
    assert effective_value("u.__proto__", {"u": {"__proto__": 1}}, schema) != 1


@pytest.mark.parametrize(
    "raw, flag",
    [
        (b'{"t": {"flag": true}, "t": {"flag": false}}', False),  # duplicate: the last wins
        (b'{"t": {"flag": false}, "x": "\xff\xfe"}', False),  # bad bytes: replacement chars
        (b'{"t": {"flag": false}, "deep": ' + b"[" * 300 + b"]" * 300 + b"}", False),
        # Deeper than Python's parser reads: JSON.parse reads it, looprail sets it aside
        # (a deliberate difference, docs/security.md).
        (b'{"t": {"flag": false}, "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", True),
        (b'{"t": {"flag": false}, "big": "' + b"a" * (9 << 20) + b'"}', False),  # over 8 MiB
        (b'\xef\xbb\xbf{"t": {"flag": false}}', True),  # a BOM fails JSON.parse: defaults
        (b'{"t": {"flag": false},}', True),  # malformed: defaults, with a warning
        (b'[{"t": {"flag": false}}]', True),  # not an object: defaults
        (b"null", True),
        (b'{"t": {"flag": false}, "n": NaN}', True),
    ],
)
def test_the_file_is_read_as_json_parse(tmp_path, raw, flag):
    caps = _caps(tmp_path)
    project = tmp_path / "p"
    _write(project, raw)
    code, out, err = _render(project, caps, "plan:pre", "--raw")
    assert code == 0
    hooks = json.loads(out)["activeHooks"]
    assert any(h["capId"] == "typed" and h["kind"] == "step" for h in hooks) is flag
    assert ("NOT applied" in err) is flag


def test_json_parse_numbers_and_depth():
    assert parse_json_js("9007199254740993") == 9007199254740992
    assert parse_json_js("1e400") == float("inf")
    assert parse_json_js("-" + "9" * 5000) == float("-inf")  # past Python's int() digit limit
    assert parse_json_js('{"a": ' + "[" * 300 + "]" * 300 + ', "b": 1}')["b"] == 1
    # Deeper than Python's parser reads (JSON.parse reads it: a deliberate difference), and
    # deep and large: refused at once (bounded time), never parsed for minutes.
    start = time.monotonic()
    for deep in ("[" * 50_000 + "]" * 50_000, "[1," * 1_000_000 + "1" + "]" * 1_000_000):
        with pytest.raises(RecursionError):
            parse_json_js(deep)
    assert time.monotonic() - start < 10
    # NaN and Infinity are refused where they start, as JSON.parse refuses them.
    for text, pos in (('{"n": NaN}', 6), ('["NaN", -Infinity]', 8), ("[1, Infinity]", 4)):
        with pytest.raises(json.JSONDecodeError) as refused:
            parse_json_js(text)
        assert refused.value.pos == pos, text
    assert [js_number(x) for x in (1e21, 1e20, 1.5e-7, 0.000001, -0.0, 100.0)] == [
        "1e+21",
        "100000000000000000000",
        "1.5e-7",
        "0.000001",
        "0",
        "100",
    ]
    assert js_dumps({"a": [1.0, {}], "b": "\ud800"}, 2) == (
        '{\n  "a": [\n    1,\n    {}\n  ],\n  "b": "\\ud800"\n}'
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_hostile_config_never_hangs(tmp_path, kind):
    """Issue 12, hostile 1: a FIFO or a link to /dev/zero is refused before a byte is read."""
    caps = _caps(tmp_path)
    project = tmp_path / "p"
    target = project / ".planning" / "config.json"
    target.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", target)
    else:
        target.mkdir()
    start = time.monotonic()
    cfg, warnings = load_project_config(project)
    assert cfg is None and "NOT applied" in warnings[0]
    proc = run_cli("loop", "render-hooks", "plan:pre", "--raw", "--project", str(project),
                   "--capabilities", str(caps))  # fmt: skip
    assert (proc.returncode == 0 and "not a regular file" in proc.stderr) or "folder" in proc.stderr
    for argv in (["lint", str(project)], ["run", "--phase", "1", "--project", str(project)]):
        proc = run_cli(*argv, "--capabilities", str(caps))
        assert proc.returncode != 0
        assert "config.json" in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - start < 60


def test_malformed_config_stops_run_lint_check_with_line_and_column(tmp_path):
    """Issue 12: a trailing comma is not "absent" for run, lint and check."""
    project = tmp_path / "p"
    (project / ".planning" / "phases" / "01-a").mkdir(parents=True)
    _write(project, '{\n  "workflow": {\n    "research": true,\n  }\n}\n')
    predicate = json.dumps({"kind": "config-equals", "key": "workflow.research", "equals": True})
    for argv in (
        ["run", "--phase", "1", "--project", str(project)],
        ["lint", str(project)],
        ["check", "predicate", "--predicate", predicate, "--phase", "1", "--project",
         str(project)],
    ):  # fmt: skip
        proc = run_cli(*argv)
        assert proc.returncode != 0, argv
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert "config.json:3:21: not valid JSON (trailing comma before '}')" in lines[0]
    proc = run_cli("loop", "render-hooks", "plan:pre", "--raw", "--project", str(project))
    assert proc.returncode == 0 and "NOT applied" in proc.stderr  # render-hooks stays fail-open


@pytest.mark.parametrize(
    ("text", "where", "closer"),
    [
        ('{"a": 1,}', (1, 8), "}"),
        ("[1, 2,]", (1, 6), "]"),
        ('{"a": [1,\n\t2 ,\n  ]}', (2, 4), "]"),
        ('{"a": {"b": []  ,\r\n}}', (1, 17), "}"),
    ],
)
def test_a_trailing_comma_is_named_at_the_comma_on_every_python(tmp_path, text, where, closer):
    """Python's parser reports a trailing comma at the bracket up to 3.12 and at the comma, in
    other words, from 3.13: looprail names it the same way on both."""
    project = tmp_path / "p"
    (project / ".planning").mkdir(parents=True)
    _write(project, text)
    with pytest.raises(ConfigError) as caught:
        load_project_config_strict(project)
    line, col = where
    assert str(caught.value).endswith(
        f"config.json:{line}:{col}: not valid JSON (trailing comma before {closer!r})"
    )


@pytest.mark.skipif(not GSD_CAPABILITIES.is_dir(), reason="../shared is absent")
def test_raw_is_byte_identical_to_the_goldens(tmp_path):
    """`--raw` prints `JSON.stringify(envelope, null, 2)` with no trailing newline."""
    for path in sorted((CONFORMANCE / "render-hooks").glob("*.json")):
        scenario = json.loads(path.read_text())
        project = tmp_path / path.stem
        project.mkdir()
        if scenario["config_json"] is not None:
            cfg = scenario["config_json"]
            _write(project, cfg if isinstance(cfg, str) else json.dumps(cfg))
        for result in scenario["results"][:12]:
            if result["exit"] != 0:
                continue
            code, out, _ = _render(project, GSD_CAPABILITIES, result["point"], "--raw")
            assert out == js_dumps(result["stdout"], 2), (path.stem, result["point"])
            assert not out.endswith("\n")


@pytest.mark.skipif(not GSD_CAPABILITIES.is_dir(), reason="../shared is absent")
def test_reference_template_keys_are_not_noise(tmp_path):
    template = {
        "mode": "interactive",
        "granularity": "standard",
        "workflow": {"research": True, "plan_check": True, "plan_bounce": False,
                     "plan_bounce_script": None, "cross_ai_timeout": 300,
                     "test_gate_timeout": 600, "code_review_command": None},
        "ship": {"pr_body_sections": []},
        "planning": {"commit_docs": True, "sub_repos": []},
        "git": {"create_tag": True},
        "parallelization": {"enabled": True, "max_concurrent_agents": 3},
        "gates": {"confirm_plan": True},
        "safety": {"always_confirm_destructive": True},
        "hooks": {"context_warnings": True},
        "project_code": None,
        "agent_skills": {},
        "claude_md_path": "./.claude/CLAUDE.md",
    }  # fmt: skip
    project = tmp_path / "p"
    _write(project, json.dumps(template))
    code, _, err = _render(project, GSD_CAPABILITIES, "plan:pre", "--raw")
    assert code == 0 and "not declared" not in err, err
    _write(project, json.dumps({"workflow": {"reserch": True}}))
    _, _, err = _render(project, GSD_CAPABILITIES, "plan:pre", "--raw")
    assert "workflow.reserch" in err  # a real typo still warns


# --------------------------------------------------------------------------- issue 18


def _gate_cap(cap_id: str, engines: str, points=("ship:pre",)):
    manifest = feature(
        cap_id,
        engines={"gsd": engines},
        gates=[
            {"point": p, "check": {"query": "always-pass"}, "blocking": True, "onError": "halt"}
            for p in points
        ],
    )
    return manifest


@pytest.mark.parametrize("where", ["project", "global", "dirs"])
def test_out_of_range_engine_is_not_loaded_on_every_path(tmp_path, where):
    project = tmp_path / "p"
    project.mkdir()
    home = tmp_path / "lhome"
    roots = {
        "project": project / ".looprail" / "capabilities",
        "global": home / "capabilities",
        "dirs": tmp_path / "caps",
    }
    write_capability(roots[where], _gate_cap("far-future", ">=99.0.0"))
    write_capability(roots[where], _gate_cap("in-range", ">=1.2.0 <2 || ^1.2", ("verify:pre",)))
    argv = ["loop", "render-hooks", "ship:pre", "--raw", "--project", str(project)]
    if where == "dirs":
        argv += ["--capabilities", str(roots["dirs"])]
    proc = run_cli(*argv, env={"LOOPRAIL_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    env = json.loads(proc.stdout)
    assert env["activeHooks"] == []
    (warning,) = env["warnings"]
    assert warning.startswith('capability "far-future" failed to load (')
    assert 'incompatible with GSD 1.10.0 (requires engines.gsd ">=99.0.0")' in warning
    assert "its gate at ship:pre is SKIPPED and NOT enforced (failing open)" in warning
    assert warning in proc.stderr
    if where != "dirs":
        flag = " --global" if where == "global" else ""
        assert f"Run `looprail capability remove{flag} far-future` to remove it" in warning
    # The in-range capability loads (its gate is only trusted-and-run elsewhere).
    proc = run_cli(*argv[:2], "verify:pre", *argv[3:], env={"LOOPRAIL_HOME": str(home)})
    assert "in-range" not in proc.stderr


def test_invalid_id_is_withheld_from_the_suggested_command(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    home = tmp_path / "lhome"
    write_capability(home / "capabilities", _gate_cap("Bad;Cap", ">=99.0.0"), folder="Bad;Cap")
    proc = run_cli(
        "loop", "render-hooks", "ship:pre", "--raw", "--project", str(project),
        env={"LOOPRAIL_HOME": str(home)},
    )  # fmt: skip
    assert proc.returncode == 0
    combined = "\n".join(json.loads(proc.stdout)["warnings"]) + proc.stderr
    assert "invalid id (withheld)" in combined
    assert "remove Bad;Cap" not in combined and "`looprail capability remove" not in combined


def test_missing_point_uses_the_reference_wording():
    for argv in (["loop", "render-hooks"], ["loop", "render-hooks", "--raw"]):
        proc = run_cli(*argv)
        assert proc.returncode == 2
        assert proc.stderr.startswith(
            "Error: loop render-hooks requires a <point> argument. Valid points: discuss:pre,"
        )
