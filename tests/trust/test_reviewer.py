"""Reviewer lanes: `review-lane dispatch-step` and `looprail.trust.reviewer` (reference §5)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from looprail.errors import UsageError
from looprail.hooks.compiled import load_compiled
from looprail.runtime.process import ProcessResult
from looprail.trust.lanes import Lane, lane_argv, lane_budget
from looprail.trust.reviewer import (
    PROHIBITIONS,
    DispatchRequest,
    build_prompt,
    dispatch_step,
    explicit_from_argv,
    parse_slugs,
)
from tests.support import run_cli, write_capability
from tests.support.reviewer import lane_body, review_step, reviewer_cap

POINT = "execute:post"


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("print('a')\n")
    (root / "src" / "b.py").write_text("print('b')\n")
    return root


def compiled_with(tmp_path, *manifests):
    caps = tmp_path / "caps"
    for m in manifests:
        write_capability(caps, m)
    return load_compiled(tmp_path / "project", [caps], use_cache=False)


def request(repo, **overrides):
    values = {
        "cap_id": "code-review",
        "point": POINT,
        "explicit": ("alpha",),
        "paths": ("src/a.py", "src/b.py"),
        "repo_root": str(repo),
        "depth": "standard",
        "base_sha": "abc123",
        "run_dir": str(repo.parent / "run"),
        "cwd": None,
    }
    values.update(overrides)
    return DispatchRequest(**values)


class FakeSpawn:
    """Records calls; answers per binary name with a ProcessResult (or raises)."""

    def __init__(self, answers=None):
        self.calls = []
        self.answers = answers or {}

    def __call__(self, argv, *, timeout_s, stdin=None, cwd=None, **_):
        self.calls.append({"argv": list(argv), "timeout_s": timeout_s, "stdin": stdin, "cwd": cwd})
        answer = self.answers.get(Path(argv[0]).name, "looks fine: src/a.py:1")
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, ProcessResult):
            return answer
        return ProcessResult(tuple(argv), 0, answer, "", 0.01)


def which_all(name):
    return f"/fake/bin/{name}"


def lanes(*bodies):
    return {b["slug"]: Lane(f"{b['slug']}-lane", b) for b in bodies}


def run(
    tmp_path, repo, *, trait=True, req=None, roster=None, spawn=None, config=None, which=which_all
):
    compiled = compiled_with(tmp_path, review_step(trait))
    spawn = spawn or FakeSpawn()
    result = dispatch_step(
        req or request(repo),
        compiled=compiled,
        config=config,
        lanes=roster if roster is not None else lanes(lane_body("alpha"), lane_body("beta")),
        spawn=spawn,
        which=which,
    )
    return result, spawn


# --------------------------------------------------------------------------- trait gating


@pytest.mark.parametrize(
    "overrides",
    [{"cap_id": "no-such-cap"}, {"cap_id": None}, {"point": None}, {"cap_id": None, "point": None}],
)
def test_unknown_or_missing_step_is_trait_not_enabled(tmp_path, repo, overrides):
    result, spawn = run(tmp_path, repo, req=request(repo, **overrides))
    assert result.to_json() == {
        "dispatched": False,
        "ok": True,
        "reason": "trait_not_enabled",
        "results": [],
    }
    assert result.exit_code == 0 and spawn.calls == []


def test_cap_id_without_point_warns(tmp_path, repo):
    result, _ = run(tmp_path, repo, req=request(repo, point=None))
    assert result.reason == "trait_not_enabled"
    assert any("--cap-id without --point" in w for w in result.warnings)


@pytest.mark.parametrize("trait", [None, False])
def test_trait_absent_or_false_is_a_no_op(tmp_path, repo, trait):
    result, spawn = run(tmp_path, repo, trait=trait)
    assert result.reason == "trait_not_enabled" and not result.dispatched and spawn.calls == []


def test_inactive_step_is_a_no_op(tmp_path, repo):
    manifest = review_step()
    manifest["config"] = {"workflow.code_review": {"type": "boolean", "default": False}}
    manifest["steps"][0]["when"] = "workflow.code_review"
    compiled = compiled_with(tmp_path, manifest)
    spawn = FakeSpawn()
    result = dispatch_step(
        request(repo),
        compiled=compiled,
        config=None,
        lanes=lanes(lane_body("alpha")),
        spawn=spawn,
        which=which_all,
    )
    assert result.reason == "trait_not_enabled" and spawn.calls == []


def test_an_unknown_point_is_a_usage_error(tmp_path, repo):
    with pytest.raises(UsageError, match="ship:post"):
        run(tmp_path, repo, req=request(repo, point="execute:later"))


# --------------------------------------------------------------------------- selection


def test_nothing_named_is_no_lanes_selected(tmp_path, repo):
    result, spawn = run(tmp_path, repo, req=request(repo, explicit=()))
    assert (result.reason, result.ok, result.exit_code) == ("no_lanes_selected", True, 0)
    assert spawn.calls == []


def test_all_named_lanes_unavailable_is_selection_failed(tmp_path, repo):
    req = request(repo, explicit=("alpha", "ghost"))
    result, spawn = run(tmp_path, repo, req=req, which=lambda name: None)
    assert (result.reason, result.ok, result.exit_code) == ("selection_failed", False, 0)
    assert [u["slug"] for u in result.selection["unavailable"]] == ["alpha", "ghost"]
    assert "not found on PATH" in result.selection["unavailable"][0]["reason"]
    assert "no active capability" in result.selection["unavailable"][1]["reason"]
    assert spawn.calls == []


def test_one_unavailable_lane_makes_ok_false_but_the_others_still_run(tmp_path, repo):
    result, spawn = run(tmp_path, repo, req=request(repo, explicit=("alpha", "ghost")))
    assert result.dispatched and not result.ok
    assert [r.slug for r in result.results] == ["alpha"] and result.results[0].ok
    assert result.selection["selected"] == ["alpha"]


def test_http_probe_is_unavailable_and_command_capability_runs_help(tmp_path, repo):
    http = lane_body(
        "gamma",
        probe={
            "kind": "http-reachable",
            "hostConfigKey": "x",
            "path": "/v1/models",
            "timeoutMs": 10,
        },
    )
    capable = lane_body(
        "delta",
        probe={
            "kind": "command-capability",
            "binary": "delta",
            "needle": "--print",
            "timeoutMs": 3000,
        },
    )
    help_text = ProcessResult(("delta", "--help"), 0, "usage: delta --print", "", 0.01)
    spawn = FakeSpawn({"delta": help_text})
    req = request(repo, explicit=("gamma", "delta"))
    result, _ = run(tmp_path, repo, req=req, roster=lanes(http, capable), spawn=spawn)
    assert result.selection["selected"] == ["delta"]
    assert "no network" in result.selection["unavailable"][0]["reason"]
    assert (
        spawn.calls[0]["argv"] == ["/fake/bin/delta", "--help"] and spawn.calls[0]["timeout_s"] == 3
    )


# --------------------------------------------------------------------------- the request


@pytest.mark.parametrize(
    ("paths", "reason"),
    [
        ((), "invalid_paths"),
        (("src/a.py", ""), "invalid_paths"),
        (("src/a.py\n## Injected section",), "invalid_paths"),
        (("src/\x1b[31ma.py",), "invalid_paths"),
        (("../outside.py",), "path_escapes_repo_root"),
        (("src/../../outside.py",), "path_escapes_repo_root"),
        (("/etc/passwd",), "path_escapes_repo_root"),
    ],
)
def test_bad_file_lists_stop_the_whole_dispatch(tmp_path, repo, paths, reason):
    result, spawn = run(tmp_path, repo, req=request(repo, paths=paths))
    assert (result.reason, result.ok, result.dispatched, result.exit_code) == (
        reason,
        False,
        False,
        1,
    )
    assert spawn.calls == []
    assert not (repo.parent / "run").exists()


def test_a_symlink_out_of_the_repo_escapes(tmp_path, repo):
    (tmp_path / "secret.py").write_text("x")
    (repo / "src" / "link.py").symlink_to(tmp_path / "secret.py")
    result, _ = run(tmp_path, repo, req=request(repo, paths=("src/link.py",)))
    assert result.reason == "path_escapes_repo_root"


def test_a_missing_file_under_a_symlinked_folder_out_of_the_repo_escapes(tmp_path, repo):
    (tmp_path / "elsewhere").mkdir()
    (repo / "src" / "out").symlink_to(tmp_path / "elsewhere")
    result, _ = run(tmp_path, repo, req=request(repo, paths=("src/out/deleted.py",)))
    assert result.reason == "path_escapes_repo_root"


def test_absolute_paths_inside_the_repo_and_deleted_files_are_fine(tmp_path, repo):
    req = request(repo, paths=(str(repo / "src" / "a.py"), "src/deleted.py"))
    result, _ = run(tmp_path, repo, req=req)
    assert result.ok and result.dispatched


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"depth": ""}, "missing_provenance"),
        ({"base_sha": None}, "missing_provenance"),
        ({"repo_root": None}, "missing_provenance"),
        ({"base_sha": "abc\nInjected: yes"}, "invalid_provenance"),
    ],
)
def test_provenance_is_required(tmp_path, repo, overrides, reason):
    result, spawn = run(tmp_path, repo, req=request(repo, **overrides))
    assert result.reason == reason and not result.ok and spawn.calls == []


# --------------------------------------------------------------------------- the prompt and lanes


def test_the_prompt_is_metadata_only_with_the_four_prohibitions(tmp_path, repo):
    result, spawn = run(tmp_path, repo)
    prompt = spawn.calls[0]["stdin"]
    assert prompt == build_prompt(str(repo), "standard", "abc123", ["src/a.py", "src/b.py"])
    assert f"Repository root: {repo}" in prompt and "Base SHA: abc123" in prompt
    assert "- src/a.py\n- src/b.py" in prompt
    assert "print('a')" not in prompt  # never file contents
    for i, rule in enumerate(PROHIBITIONS, 1):
        assert f"{i}. {rule}" in prompt
    assert len(PROHIBITIONS) == 4
    assert (repo.parent / "run" / "review-prompt.md").read_text() == prompt


def test_results_have_the_documented_shape_and_files(tmp_path, repo):
    spawn = FakeSpawn({"beta": ProcessResult(("beta",), 3, "", "beta: quota exceeded\n", 0.01)})
    result, _ = run(tmp_path, repo, req=request(repo, explicit=("alpha", "beta")), spawn=spawn)
    out = result.to_json()
    assert list(out) == ["dispatched", "ok", "selection", "results"]
    assert out["dispatched"] is True and out["ok"] is False
    alpha, beta = out["results"]
    assert list(alpha) == ["slug", "ok", "reason", "detail", "reviewPath", "errPath"]
    run_dir = repo.parent / "run"
    assert alpha["ok"] and alpha["reason"] is None
    assert alpha["reviewPath"] == str(run_dir / "alpha-REVIEW.md")
    assert (run_dir / "alpha-REVIEW.md").read_text() == "looks fine: src/a.py:1"
    assert (
        beta["ok"] is False
        and beta["reason"] == "exit_nonzero"
        and "quota exceeded" in beta["detail"]
    )
    assert (run_dir / "beta.err").read_text() == "beta: quota exceeded\n"


def test_one_lane_raising_never_cancels_its_siblings(tmp_path, repo):
    spawn = FakeSpawn({"alpha": RuntimeError("boom")})
    result, _ = run(tmp_path, repo, req=request(repo, explicit=("alpha", "beta")), spawn=spawn)
    assert [(r.slug, r.ok, r.reason) for r in result.results] == [
        ("alpha", False, "invoke_failed"),
        ("beta", True, None),
    ]


def test_budget_exceeded_skips_only_that_lane(tmp_path, repo):
    tight = lane_body("alpha", promptBudgetKey="review.max_prompt_tokens_per_reviewer.alpha")
    roster = lanes(tight, lane_body("beta"))
    config = {"review": {"max_prompt_tokens_per_reviewer": {"alpha": 10}}}
    req = request(repo, explicit=("alpha", "beta"))
    result, spawn = run(tmp_path, repo, req=req, roster=roster, config=config)
    alpha, beta = result.results
    assert alpha.reason == "budget_exceeded" and "exceeds the budget 10" in alpha.detail
    assert beta.ok and [Path(c["argv"][0]).name for c in spawn.calls] == ["beta"]


def test_budget_resolution():
    lane = Lane("x", lane_body("x", promptBudgetKey="review.budget.x"))
    assert lane_budget(lane, None) is None
    assert lane_budget(lane, {"review": {"budget": {"x": 500}}}) == 500
    assert lane_budget(lane, {"review": {"budget": {"x": -1}, "max_prompt_tokens": 90}}) == 90
    assert lane_budget(Lane("y", lane_body("y")), {"review": {"max_prompt_tokens": 90}}) is None


def test_unsupported_transport_and_prompt_channel(tmp_path, repo):
    http = lane_body(
        "ollama",
        transport="openai-http",
        probe={"kind": "http-reachable"},
        invoke={"defaultHost": "http://localhost:11434"},
    )
    none = lane_body("coderabbit", invoke={"promptChannel": "none"})
    req = request(repo, explicit=("ollama", "coderabbit"))
    result, spawn = run(tmp_path, repo, req=req, roster=lanes(http, none))
    assert [(r.slug, r.reason) for r in result.results] == [
        ("ollama", "unsupported_transport"),
        ("coderabbit", "prompt_channel_unsupported"),
    ]
    assert not result.dispatched and spawn.calls == []


def test_placeholders_expand_only_as_whole_elements():
    body = lane_body(
        "codex",
        modelConfigKey="review.models.codex",
        invoke={
            "args": [
                "exec",
                "{{model}}",
                "{{effort}}",
                "--x={{model}}",
                "{{output}}",
                "{{prompt}}",
                "-",
            ],
            "modelArg": "--model",
            "effortChannel": "argv",
            "effortArg": "--effort",
            "outputChannel": "file-arg",
            "outputArg": "-o",
            "promptChannel": "argv-file-ref",
        },
    )
    config = {"review": {"models": {"codex": "gpt-x"}, "efforts": {"codex": "high"}}}
    argv = lane_argv(
        Lane("c", body),
        "/bin/codex",
        config,
        review_path="/r/codex-REVIEW.md",
        prompt_path="/r/p.md",
    )
    assert argv == [
        "/bin/codex", "exec", "--model", "gpt-x", "--effort", "high", "--x={{model}}",
        "-o", "/r/codex-REVIEW.md", "Read the review request in /r/p.md and follow it.", "-",
    ]  # fmt: skip
    bare = lane_argv(Lane("c", body), "/bin/codex", None, review_path="/r/o", prompt_path="/r/p")
    assert bare[:3] == ["/bin/codex", "exec", "--x={{model}}"]


def test_slug_parsing_and_flag_mapping():
    assert parse_slugs("codex, gemini  codex") == ("codex", "gemini")
    assert parse_slugs("") == ()
    roster = lanes(lane_body("codex"), lane_body("antigravity", flags=["--antigravity", "--agy"]))
    assert explicit_from_argv(["--codex", "--agy", "--other"], roster) == ("antigravity", "codex")


# --------------------------------------------------------------------------- end to end


def fake_lane(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nimport sys, time, pathlib\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def e2e(tmp_path, repo):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_lane(
        bin_dir,
        "echoer",
        "data = sys.stdin.read()\nprint('REVIEW of ' + str(len(data.splitlines())) + ' lines')\nprint('noise', file=sys.stderr)",
    )
    fake_lane(
        bin_dir,
        "writer",
        "out = sys.argv[sys.argv.index('-o') + 1]\npathlib.Path(out).write_text('written review')",
    )
    fake_lane(
        bin_dir, "sleeper", "time.sleep(60)\npathlib.Path(sys.argv[1]).write_text('finished')"
    )
    fake_lane(bin_dir, "mute", "sys.stdin.read()\nprint('nothing to say', file=sys.stderr)")
    caps = tmp_path / "caps"
    write_capability(caps, review_step())
    write_capability(caps, reviewer_cap("echoer"))
    write_capability(
        caps,
        reviewer_cap(
            "writer",
            invoke={
                "args": ["{{output}}"],
                "outputChannel": "file-arg",
                "outputArg": "-o",
                "promptChannel": "argv-file-ref",
            },
        ),
    )
    sentinel = tmp_path / "sleeper-finished"
    write_capability(
        caps, reviewer_cap("sleeper", timeoutFloorMs=1000, invoke={"args": [str(sentinel)]})
    )
    write_capability(caps, reviewer_cap("mute"))
    project = tmp_path / "project"
    (project / ".planning").mkdir(parents=True)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return project, caps, env, sentinel


def dispatch_cli(project, caps, env, repo, explicit, files="src/a.py\nsrc/b.py\n", *extra):
    return run_cli(
        "review-lane", "dispatch-step", "--cap-id", "code-review", "--point", POINT,
        "--explicit", explicit, "--repo-root", str(repo), "--depth", "deep", "--base-sha", "f00d",
        "--run-dir", str(repo.parent / "run"), "--raw", "--project", str(project),
        "--capabilities", str(caps), *extra,
        env=env, input=files,
    )  # fmt: skip


def test_cli_runs_real_lanes_with_their_channels(e2e, repo):
    project, caps, env, sentinel = e2e
    p = dispatch_cli(project, caps, env, repo, "echoer,writer,sleeper,mute")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["dispatched"] is True and out["ok"] is False
    results = {r["slug"]: r for r in out["results"]}
    run_dir = repo.parent / "run"
    assert results["echoer"]["ok"]
    assert (run_dir / "echoer-REVIEW.md").read_text().startswith("REVIEW of ")
    assert (run_dir / "echoer.err").read_text() == "noise\n"
    assert (
        results["writer"]["ok"] and (run_dir / "writer-REVIEW.md").read_text() == "written review"
    )
    # The hung lane was killed at its timeout (its whole process group): it never finished.
    assert results["sleeper"]["reason"] == "timeout" and "killed" in results["sleeper"]["detail"]
    assert not sentinel.exists()
    assert results["mute"]["reason"] == "empty_output"
    assert "nothing to say" in (run_dir / "mute-REVIEW.md").read_text()


def test_cli_no_op_reasons_exit_zero(e2e, repo):
    project, caps, env, _ = e2e
    p = run_cli(
        "review-lane", "dispatch-step", "--cap-id", "code-review", "--raw",
        "--project", str(project), "--capabilities", str(caps), env=env, input="",
    )  # fmt: skip
    assert p.returncode == 0 and json.loads(p.stdout)["reason"] == "trait_not_enabled"
    assert "--cap-id without --point" in p.stderr
    p = dispatch_cli(project, caps, env, repo, "")
    assert p.returncode == 0 and json.loads(p.stdout)["reason"] == "no_lanes_selected"
    p = dispatch_cli(project, caps, env, repo, "nobody")
    assert p.returncode == 0 and json.loads(p.stdout)["reason"] == "selection_failed"
    p = dispatch_cli(project, caps, env, repo, "echoer", "../../etc/passwd\n")
    assert p.returncode == 1 and json.loads(p.stdout)["reason"] == "path_escapes_repo_root"


def test_cli_ignores_lanes_of_unconsented_project_capabilities(e2e, repo, tmp_path):
    project, caps, env, _ = e2e
    write_capability(project / ".looprail" / "capabilities", reviewer_cap("third"))
    fake_lane(tmp_path / "bin", "third", "print('should not run')")
    p = dispatch_cli(project, caps, env, repo, "third")
    out = json.loads(p.stdout)
    assert out["reason"] == "selection_failed"
    assert "no active capability" in out["selection"]["unavailable"][0]["reason"]
    assert run_cli("trust", "--project", str(project), "--yes", env=env).returncode == 0
    out = json.loads(dispatch_cli(project, caps, env, repo, "third").stdout)
    assert out["ok"] is True and out["results"][0]["slug"] == "third"


def test_cli_explicit_from_argv(e2e):
    project, caps, env, _ = e2e
    p = run_cli(
        "review-lane", "explicit-from-argv", "--project", str(project), "--capabilities", str(caps),
        "--", "--writer", "--echoer", "--nope", env=env,
    )  # fmt: skip
    assert p.returncode == 0 and p.stdout.strip() == "echoer,writer"


def test_cli_refuses_a_project_config_value_that_would_be_read_as_an_option(
    tmp_path, repo
):  # issue 12, hostile item 8
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sentinel = tmp_path / "OPTION-INJECTED"
    fake_lane(
        bin_dir,
        "modeler",
        f"sys.stdin.read()\nif any(a.startswith('--') for a in sys.argv[1:]):\n"
        f"    pathlib.Path({str(sentinel)!r}).write_text(' '.join(sys.argv))\nprint('review')",
    )
    caps = tmp_path / "caps"
    write_capability(caps, review_step())
    write_capability(
        caps,
        reviewer_cap(
            "modeler",
            modelConfigKey="review.model",
            invoke={"args": ["{{model}}"], "promptChannel": "stdin", "outputChannel": "stdout"},
        ),
    )
    project = tmp_path / "project"
    (project / ".planning").mkdir(parents=True)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for model in ("--dangerously-skip-permissions", "-x"):
        (project / ".planning" / "config.json").write_text(json.dumps({"review": {"model": model}}))
        out = json.loads(dispatch_cli(project, caps, env, repo, "modeler").stdout)
        assert out["ok"] is False, out
        result = out["results"][0]
        assert (
            result["reason"] == "malformed_lane"
            and "would be read as an option" in result["detail"]
        ), result
        assert not sentinel.exists()
    # a plain model name still reaches the lane
    (project / ".planning" / "config.json").write_text(json.dumps({"review": {"model": "m-1"}}))
    out = json.loads(dispatch_cli(project, caps, env, repo, "modeler").stdout)
    assert out["ok"] is True, out
