"""The runtime conformance kit: `check_runtime(make, project)` asserts the contract the state
machine relies on of every typed call (docs/testing.md, "Testing a runtime"; docs/runtime.md).
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
    ask_verdict,
    compact,
    deliver_context,
    deliver_message,
    do_phase_work,
    execute_task,
    run_command,
    run_query_check,
    run_skill,
    spawn_agent,
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
    out.update(_work_calls(runtime, ctx))
    for kind in expect_ok:
        keys = [k for k in out if k == kind or k.startswith(f"{kind}:")]
        for key in keys:
            assert out[key].ok, f"{key} should succeed here: {out[key].detail}"
    _check_declared(runtime, project)
    return out


def _hook_calls(runtime: Runtime, ctx: DispatchContext) -> dict[str, Outcome]:
    """The calls a hook makes: context, skill, agent, command, query, verdict."""
    out: dict[str, Outcome] = {}
    out["context"] = _check_outcome(
        "deliver_context", deliver_context(runtime, "planner", "CONFORMANCE: a fragment", ctx)
    )
    out["skill"] = _check_outcome("run_skill", run_skill(runtime, "gsd-conformance", ctx))
    out["agent"] = _check_outcome("spawn_agent", spawn_agent(runtime, "conformance", ctx))
    out["command"] = _check_outcome("run_command", run_command(runtime, ["conformance"], ctx))
    out["query"] = _check_outcome("run_query_check", run_query_check(runtime, ["conf"], ctx))
    out["verdict"] = _check_outcome(
        "ask_verdict", ask_verdict(runtime, {"ref": "conformance", "prompt": "ok?"}, ctx)
    )
    for kind in ("query", "verdict"):
        if out[kind].ok:
            data = out[kind].data or {}
            assert isinstance(data.get("block"), bool), f"ok {kind} without a boolean block"
    return out


def _work_calls(runtime: Runtime, ctx: DispatchContext) -> dict[str, Outcome]:
    """The role work (the phase steps, one task) and the session calls (message, compact)."""
    out: dict[str, Outcome] = {}
    work_ctx = ctx.model_copy(update={"point": None})
    for role, step in (("orchestrator", "discuss"), ("planner", "plan"), ("verifier", "verify")):
        outcome = do_phase_work(runtime, role, step, work_ctx, ["CONFORMANCE: a fragment"])
        out[f"phase:{step}"] = _check_outcome(f"do_phase_work({step})", outcome)
    out["phase"] = out["phase:plan"]
    task = TaskWork(plan_id="01-01", task_id="T1", index=1, name="conformance", files=("c.txt",))
    task_ctx = work_ctx.model_copy(update={"plan_id": "01-01", "task_id": "T1"})
    out["task"] = _check_outcome("execute_task", execute_task(runtime, task, task_ctx))
    message = deliver_message(
        runtime,
        "CONFORMANCE: a message",
        send_as="custom",
        delivery="steer",
        trigger_turn=False,
        ctx=ctx,
    )
    out["message"] = _check_outcome("deliver_message", message)
    out["compact"] = _check_outcome("compact", compact(runtime, None, ctx))
    return out


def _check_declared(runtime: Runtime, project: Path) -> None:
    """What it declares: a typed description, run hooks that take a run and let it go, and (if
    registered) the entry point that builds it."""
    info = runtime.describe()
    assert isinstance(info, RuntimeInfo), f"describe() returned {type(info).__name__}"
    assert info.name, "describe() names no runtime"
    why = info.unready
    assert why is None or (isinstance(why, str) and "\n" not in why), f"unready: {why!r}"
    runtime.begin_run(RunStart(None))
    runtime.end_run()
    name = runtime.name if isinstance(runtime, BaseRuntime) else ""
    if name:
        assert runtime_class(name) is type(runtime), f"entry point {name!r} is another class"
        assert info.name == name, f"describe() names {info.name!r}, registered as {name!r}"
        built = create_runtime(name, RuntimeSettings(project=project))
        assert type(built) is type(runtime), f"from_settings() built {type(built).__name__}"
