"""The runtime conformance kit: one check every runtime passes, looprail's own and plugins'.

    from looprail.testing.conformance import check_runtime

    def test_my_runtime_conforms(tmp_path):
        project = make_my_project(tmp_path)          # whatever your runtime needs to work
        check_runtime(lambda: MyRuntime(project), project)

`check_runtime` drives every typed call of the `Runtime` protocol through a fresh runtime and
asserts the contract the state machine relies on (docs/runtime.md):

- it is a `Runtime`; every call returns an `Outcome` and never raises for failed work;
- a failed `Outcome` says why in one line; an ok one has exit code 0 or None;
- an ok query or verdict carries a `{"block": bool}` verdict in `data`;
- an unusable `agentVerdict` is a failed Outcome, not an exception;
- programming errors are exceptions: `words` as a str (TypeError), no step (ValueError);
- `deliver_context` returns None and the work that follows still runs;
- if registered (`name`), the `looprail.runtimes` entry point builds it with `from_settings`.

`expect_ok` names the calls that must succeed in the prepared project (by default the role
work: the four phase steps' roles and one task); everything else may fail, but by the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from looprail.runtime.base import (
    BaseRuntime,
    DispatchContext,
    Outcome,
    RunStart,
    Runtime,
    RuntimeInfo,
    TaskWork,
)
from looprail.runtime.registry import RuntimeSettings, create_runtime, runtime_class


def _check_outcome(what: str, outcome: Any) -> Outcome:
    assert isinstance(outcome, Outcome), f"{what} returned {type(outcome).__name__}, not Outcome"
    if outcome.ok:
        assert outcome.exit_code in (0, None), f"{what}: ok with exit code {outcome.exit_code}"
    else:
        assert outcome.detail and "\n" not in outcome.detail, f"{what}: detail must be one line"
    return outcome


def check_runtime(
    make: Callable[[], Any],
    project: Path,
    *,
    phase_number: str = "1",
    phase_dir: Path | None = None,
    expect_ok: Iterable[str] = ("phase", "task"),
) -> dict[str, Outcome]:
    """Run the kit (see the module docstring); returns each call's Outcome for further checks."""
    project = Path(project).resolve()
    runtime = make()
    assert isinstance(runtime, Runtime), f"{type(runtime).__name__} is not a Runtime"
    ctx = DispatchContext(
        project=project,
        phase_number=phase_number,
        phase_dir=phase_dir.resolve() if phase_dir else None,
        point="plan:pre",
    )
    out = _hook_calls(runtime, ctx)
    _check_programming_errors(runtime, ctx)
    out.update(_work_calls(runtime, ctx))
    for kind in expect_ok:
        keys = [k for k in out if k == kind or k.startswith(f"{kind}:")]
        for key in keys:
            assert out[key].ok, f"{key} should succeed here: {out[key].detail}"
    _check_declared(runtime, project)
    return out


def _hook_calls(runtime: Runtime, ctx: DispatchContext) -> dict[str, Outcome]:
    """The calls a hook makes: context, skill, agent, command, query, verdict."""
    # Typed `-> None`, but a plugin may still return something: the kit checks it does not.
    deliver: Callable[..., object] = runtime.deliver_context
    assert deliver("planner", "CONFORMANCE: a contribution", ctx) is None
    out: dict[str, Outcome] = {}
    out["skill"] = _check_outcome("run_skill", runtime.run_skill("gsd-conformance", ctx))
    out["agent"] = _check_outcome("spawn_agent", runtime.spawn_agent("conformance", ctx))
    out["command"] = _check_outcome("run_command", runtime.run_command(["conformance"], ctx))
    out["query"] = _check_outcome("run_query_check", runtime.run_query_check(["conf"], ctx))
    out["verdict"] = _check_outcome(
        "ask_verdict", runtime.ask_verdict({"ref": "conformance", "prompt": "ok?"}, ctx)
    )
    for kind in ("query", "verdict"):
        if out[kind].ok:
            data = out[kind].data or {}
            assert isinstance(data.get("block"), bool), f"ok {kind} without a boolean block"
    bad = runtime.ask_verdict({"prompt": "no ref"}, ctx)
    assert not _check_outcome("ask_verdict without ref", bad).ok
    return out


def _check_programming_errors(runtime: Runtime, ctx: DispatchContext) -> None:
    import pytest  # a test dependency: only where the kit runs, inside a runtime's tests

    with pytest.raises(TypeError):
        runtime.run_command("conformance", ctx)  # a str type-checks as Sequence[str]
    with pytest.raises(ValueError):
        runtime.do_phase_work("planner", "", ctx)


def _work_calls(runtime: Runtime, ctx: DispatchContext) -> dict[str, Outcome]:
    """The role work (the phase steps, one task) and the session calls (message, compact)."""
    out: dict[str, Outcome] = {}
    for role, step in (("orchestrator", "discuss"), ("planner", "plan"), ("verifier", "verify")):
        out[f"phase:{step}"] = _check_outcome(
            f"do_phase_work({step})",
            runtime.do_phase_work(role, step, ctx.model_copy(update={"point": None})),
        )
    out["phase"] = out["phase:plan"]
    task = TaskWork(plan_id="01-01", task_id="T1", index=1, name="conformance", files=("c.txt",))
    task_ctx = ctx.model_copy(update={"point": None, "plan_id": "01-01", "task_id": "T1"})
    out["task"] = _check_outcome("execute_task", runtime.execute_task(task, task_ctx))
    message = runtime.deliver_message(
        "CONFORMANCE: a message", send_as="custom", delivery="steer", trigger_turn=False, ctx=ctx
    )
    out["message"] = _check_outcome("deliver_message", message)
    out["compact"] = _check_outcome("compact", runtime.compact(None, ctx))
    return out


def _check_declared(runtime: Runtime, project: Path) -> None:
    """What it declares: a typed description, run hooks that take a run and let it go, and (if
    registered) the entry point that builds it."""
    info = runtime.describe()
    assert isinstance(info, RuntimeInfo), f"describe() returned {type(info).__name__}"
    assert info.name, "describe() names no runtime"
    why = runtime.unready()
    assert why is None or (isinstance(why, str) and "\n" not in why), f"unready(): {why!r}"
    runtime.begin_run(RunStart(None))
    runtime.end_run()
    name = runtime.name if isinstance(runtime, BaseRuntime) else ""
    if name:
        assert runtime_class(name) is type(runtime), f"entry point {name!r} is another class"
        assert info.name == name, f"describe() names {info.name!r}, registered as {name!r}"
        built = create_runtime(name, RuntimeSettings(project=project))
        assert type(built) is type(runtime), f"from_settings() built {type(built).__name__}"
