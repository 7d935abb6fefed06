"""The `Runtime` protocol, the one seam between the state machine (what runs) and a runtime
(how). Every call is bounded and returns an `Outcome`; a failing unit of work is a failed
`Outcome`, never an exception. The typed calls (`run_skill(runtime, ...)`, ...) build the
`Request` (`runtime.request`, re-exported here) and hand it to `handle`."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict, runtime_checkable

from pydantic import model_validator

from looprail.plans.roadmap import UNKNOWN_REQ_IDS, roadmap_req_ids
from looprail.runtime.request import (
    DispatchContext,
    Frozen,
    Request,
    TaskWork,
    build_request,
    checked_words,
    message_ask,
    step_of,
    verdict_ask,
)
from looprail.runtime.request import Flavor as Flavor
from looprail.runtime.request import RequestKind as RequestKind

if TYPE_CHECKING:
    from looprail.runtime.meter import Meter

EXIT_UNAVAILABLE = 69  # "could not look": an error of the check itself, never a verdict
TASK_ROLE = "executor"
SESSION_NAME = "session"  # the name native-hook messages and compactions are addressed to
# Who does each step's main work. Data, so a LoopSpec can name other roles.
PHASE_ROLES: Mapping[str, str] = {
    "discuss": "orchestrator",
    "plan": "planner",
    "verify": "verifier",
    "ship": "orchestrator",
}


def spawn_banner(agent: str) -> str:
    """The liveness line before an agent is spawned, as docs/contract.md ("Dispatch") words it."""
    return (
        f"◆ Spawning {agent}... (runs in a subagent — no output until it returns; "
        "expected, not a freeze)"
    )


# How long agent work is silent before its liveness banner is printed: work that returns
# sooner (a 40 ms script) never shows it, and with -v a line it prints first cancels it.
BANNER_AFTER_S = 2.0


class Liveness:
    """The liveness banner of one unit of agent work: `show(line)` once the work has been
    silent for `after_s` (at once when `after_s` <= 0), never after `close()`."""

    def __init__(self, show: Callable[[str], Any] | None, line: str | None, after_s: float):
        self._timer: threading.Timer | None = None
        if show is None or line is None:
            return
        if after_s <= 0:
            show(line)
            return
        self._timer = threading.Timer(after_s, show, args=(line,))
        self._timer.name = "looprail-liveness"
        self._timer.daemon = True
        self._timer.start()

    def close(self) -> None:
        """The work ended or printed a line: no banner from now on (nor a timer thread)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            if timer is not threading.current_thread():
                timer.join()


class Usage(Frozen):
    """What an agent CLI reported about one invocation; None where it reported nothing."""

    agent: str
    session_id: str | None = None
    input_tokens: int | None = None  # every prompt token, prompt-cache reads and writes included
    cached_input_tokens: int | None = None  # of those, the ones read from the prompt cache
    output_tokens: int | None = None
    cost_usd: float | None = None


class OutcomeFields(TypedDict, total=False):
    stdout: str
    stderr: str
    duration_s: float
    truncated: bool
    usage: Usage | None
    transcript: str | None


class Outcome(Frozen):
    """What one unit of work did. `ok` is the only thing a caller must read; `detail` is one
    line saying why it failed (empty when it did not)."""

    ok: bool
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    data: dict[str, object] | None = None  # stdout parsed, when stdout is one JSON object
    detail: str = ""
    timed_out: bool = False
    unavailable: bool = False  # exit 69: the unit could not look
    truncated: bool = False  # output went past the runtime's cap and was cut
    usage: Usage | None = None  # tokens, cost, session id, when an agent CLI reported them
    transcript: str | None = None  # where its transcript or log was filed (project-relative)

    @model_validator(mode="after")
    def _consistent(self) -> Outcome:
        if self.ok and (self.timed_out or self.unavailable or self.detail):
            raise ValueError("an ok Outcome cannot be timed out, unavailable or carry a detail")
        if self.ok and self.exit_code not in (0, None):
            raise ValueError(f"an ok Outcome cannot have exit code {self.exit_code}")
        if not self.ok and not self.detail:
            raise ValueError("a failed Outcome must say why in `detail`")
        if "\n" in self.detail:
            raise ValueError("`detail` is one line")
        if (self.exit_code == EXIT_UNAVAILABLE) != self.unavailable:
            raise ValueError(f"`unavailable` is exactly `exit_code == {EXIT_UNAVAILABLE}`")
        return self

    @classmethod
    def succeeded(
        cls, stdout: str | None = None, *, data: Mapping[str, Any] | None = None, **extra: Any
    ) -> Outcome:
        """An ok outcome. Given `data` only, stdout is its JSON (so both always agree)."""
        if stdout is None:
            stdout = json.dumps(dict(data)) if data is not None else ""
        payload = parse_json_object(stdout) if data is None else dict(data)
        return cls(ok=True, exit_code=0, stdout=stdout, data=payload, **extra)

    @classmethod
    def failed(cls, detail: str, *, exit_code: int | None = None, **extra: Any) -> Outcome:
        """A failed outcome; `exit_code` 69 marks it unavailable."""
        data = extra.pop("data", None)
        if data is None and extra.get("stdout"):
            data = parse_json_object(extra["stdout"])
        return cls(
            ok=False,
            exit_code=exit_code,
            detail=" ".join(detail.split()) or "failed",
            unavailable=exit_code == EXIT_UNAVAILABLE,
            data=data,
            **extra,
        )


def parse_json_object(text: str) -> dict[str, object] | None:
    """`text` as a JSON object, or None when it is empty, not JSON, or not an object."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError (empty too), or an int too long
        return None
    return value if isinstance(value, dict) else None


def verdict_problem(outcome: Outcome) -> str | None:
    """Why an exit-0 outcome does not carry a `{block, message}` verdict, or None if it does."""
    data = outcome.data
    if data is None:
        if outcome.truncated:
            return "printed more than the output cap; the verdict was cut"
        if not outcome.stdout.strip():
            return "printed no verdict (stdout is empty)"
        return "stdout is not a JSON object"
    if not isinstance(data.get("block"), bool):
        return 'verdict has no boolean "block"'
    if "message" in data and not isinstance(data["message"], str):
        return 'verdict "message" is not a string'
    return None


def require_verdict(outcome: Outcome, label: str) -> Outcome:
    """A check that exited 0 without a usable verdict is an error of the check itself."""
    problem = verdict_problem(outcome) if outcome.ok else None
    if problem is None:
        return outcome
    return outcome.model_copy(update={"ok": False, "detail": f"{label} {problem}"})


class RuntimeInfo(Frozen):
    """What a runtime declares about itself (`describe()`); the machine never probes."""

    #: The name a run journals as its agent (`machine_config.agent`) and resumes compare.
    name: str
    #: Plans work in git worktrees (unless `looprail.worktrees` says otherwise).
    wants_worktrees: bool = False
    #: For commands, queries and `host` requests; None: looprail evaluates the gates itself.
    host_tool: str | None = None
    #: Why it cannot run at all (an agent CLI not on PATH), or None; read before a run starts.
    unready: str | None = None


@dataclass(frozen=True)
class RunStart:
    """What `begin_run` is told; `meter` tallies agent work against the budget."""

    run_id: str | None
    meter: Meter | None = None


@runtime_checkable
class Runtime(Protocol):
    """What the state machine calls, and all of it: `handle` does every unit of work (the typed
    calls build its `Request`), `describe` says what the runtime declares, and the run hooks
    bracket a run. Every unit of work is bounded and returns an `Outcome`, failed or not, never
    an exception. `BaseRuntime` has a default for all but `handle` (docs/runtime.md)."""

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        """Do the unit of work `request` describes."""

    def describe(self) -> RuntimeInfo:
        """Its name, wishes (worktrees), host tool and readiness."""

    def begin_run(self, run: RunStart) -> None:
        """Told once a run id is known, before any work (transcripts, the cost meter)."""

    def end_run(self) -> None:
        """Told when the run is over, however it ended; later calls belong to no run."""


class BaseRuntime:
    """A runtime implements `handle`. Every runtime receives the same `Request` from a typed
    call, so a test runtime cannot drift from a real one."""

    #: The name this runtime is registered under (`looprail.runtimes` entry points).
    name: ClassVar[str] = ""
    #: Seconds of silence before agent work's liveness banner (`announce`); 0: at once.
    banner_after_s: float = BANNER_AFTER_S

    def __init__(self, *, progress: Any = None, output: Any = None) -> None:
        self.progress = progress
        self.output = output  # `-v`: `output(label, stream, line)` for each line work prints

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        """Do the unit of work `request` describes; a failure is a failed `Outcome`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement handle()")

    def describe(self) -> RuntimeInfo:
        return RuntimeInfo(name=self.name or type(self).__name__)

    def begin_run(self, run: RunStart) -> None:
        """Default: nothing."""

    def end_run(self) -> None:
        """Default: nothing."""

    def line_sink(
        self,
        request: Request,
        show: Callable[[str], str | None] | None = None,
        liveness: Liveness | None = None,
    ) -> Callable[[str, str], None] | None:
        """What `-v` is handed each line a unit of work prints, labelled (None without `-v`);
        `show` reads a stdout line into words first. A line cancels the `liveness` banner."""
        output = self.output
        if output is None:
            return None
        label = output_label(request)

        def sink(stream: str, text: str) -> None:
            if liveness is not None:
                liveness.close()  # its output shows it is alive
            if show is None:
                output(label, stream, text)
                return
            shown = show(text) if stream == "stdout" else text
            for part in (shown or "").splitlines():  # an event's text may hold many lines
                output(label, stream, part)

        return sink

    def announce(self, request: Request) -> Liveness:
        """Agent work's liveness banner (after `banner_after_s`); the caller closes it."""
        label = banner_label(request)
        line = spawn_banner(label) if label is not None else None
        return Liveness(self.progress, line, self.banner_after_s)


def run_skill(runtime: Runtime, skill_id: str, ctx: DispatchContext) -> Outcome:
    """Run a skill step; `skill_id` is already prefixed with the flavor (`gsd-foo`)."""
    return runtime.handle(build_request("skill", skill_id, ctx), ctx)


def spawn_agent(runtime: Runtime, agent: str, ctx: DispatchContext) -> Outcome:
    """Spawn an agent step (the runtime prints the liveness banner first)."""
    return runtime.handle(build_request("agent", agent, ctx), ctx)


def run_command(runtime: Runtime, words: Sequence[str], ctx: DispatchContext) -> Outcome:
    """Run a grammar-checked `ref.command` (split on spaces) with `--phase <N> --raw`."""
    words = checked_words(words)
    return runtime.handle(build_request("command", " ".join(words), ctx, words=words), ctx)


def run_query_check(runtime: Runtime, words: Sequence[str], ctx: DispatchContext) -> Outcome:
    """Run a gate's `check.query`; ok means a `{block, message}` verdict is in `data`."""
    words = checked_words(words)
    return _verdict(runtime, build_request("query", " ".join(words), ctx, words=words), ctx)


def ask_verdict(
    runtime: Runtime, agent_verdict: Mapping[str, Any], ctx: DispatchContext
) -> Outcome:
    """Ask an agent for an advisory `agentVerdict` (`{ref, prompt}`); ok as for a query."""
    ask = verdict_ask(agent_verdict)
    if isinstance(ask, str):
        return Outcome.failed(ask)
    return _verdict(runtime, build_request("verdict", ask.ref, ctx, verdict=ask), ctx)


def _verdict(runtime: Runtime, request: Request, ctx: DispatchContext) -> Outcome:
    # for a runtime that does not check the verdict in its own words first
    return require_verdict(runtime.handle(request, ctx), f"{request.kind} {request.name!r}")


def do_phase_work(
    runtime: Runtime, role: str, step: str, ctx: DispatchContext, texts: Sequence[str] = ()
) -> Outcome:
    """The step's main work by a role agent; `texts`: the contributions queued for the role."""
    if not step:
        raise ValueError("do_phase_work needs a step")
    context = {role: tuple(texts)}
    request = build_request("phase", step, ctx, role=role, step=step, role_context=context)
    return runtime.handle(request, ctx)


def execute_task(
    runtime: Runtime, task: TaskWork, ctx: DispatchContext, texts: Sequence[str] = ()
) -> Outcome:
    """The executor role runs one task; `texts` as for `do_phase_work`."""
    request = build_request(
        "task",
        task.key,
        ctx,
        plan_id=task.plan_id,
        task_id=task.task_id,
        role=TASK_ROLE,
        step="execute",
        role_context={TASK_ROLE: tuple(texts)},
        task=task,
    )
    return runtime.handle(request, ctx)


def deliver_context(runtime: Runtime, role: str, text: str, ctx: DispatchContext) -> Outcome:
    """A contribution queued `text` for `role` at `ctx.point` (the machine keeps it for the
    role's work; a runtime may ignore this)."""
    if not role:
        raise ValueError("deliver_context needs a role")
    if ctx.point is None:
        raise ValueError("deliver_context needs ctx.point (the contribution's point)")
    request = build_request(
        "context", role, ctx, role=role, step=step_of(ctx.point), role_context={role: (text,)}
    )
    return runtime.handle(request, ctx)


def deliver_message(
    runtime: Runtime,
    text: str,
    *,
    send_as: str,
    delivery: str,
    trigger_turn: bool,
    ctx: DispatchContext,
) -> Outcome:
    """Deliver a native-hook message to the agent session."""
    message = message_ask(text, send_as=send_as, delivery=delivery, trigger_turn=trigger_turn)
    return runtime.handle(build_request("message", SESSION_NAME, ctx, message=message), ctx)


def compact(runtime: Runtime, instructions: str | None, ctx: DispatchContext) -> Outcome:
    """Ask the agent session to compact its context."""
    request = build_request("compact", SESSION_NAME, ctx, instructions=instructions)
    return runtime.handle(request, ctx)


def host_tool_for(runtime: Runtime, ctx: DispatchContext) -> str | None:
    """The host tool that answers gates for `ctx`: the context's, else the runtime's, or None."""
    return ctx.host_tool or runtime.describe().host_tool


def run_host(runtime: Runtime, args: Sequence[str], ctx: DispatchContext) -> Outcome:
    """`<host tool> <args>`: the gates the host's workflow calls the tool for directly."""
    args = tuple(args)
    return runtime.handle(build_request("host", " ".join(args[:2]), ctx, words=args), ctx)


def phase_req_ids(runtime: Runtime, ctx: DispatchContext) -> str:
    """The phase's requirement ids as the reference's plan-phase workflow gets them
    (docs/checks.md): from the host tool's `query init.plan-phase N --pick phase_req_ids`,
    else the ROADMAP.md section; "TBD" (the workflow's fallback) when neither knows."""
    if not host_tool_for(runtime, ctx):
        return roadmap_req_ids(ctx.project, ctx.phase_number) or UNKNOWN_REQ_IDS
    args = ["query", "init.plan-phase", ctx.phase_number, "--pick", "phase_req_ids"]
    outcome = run_host(runtime, args, ctx)
    text = outcome.stdout.strip() if outcome.ok else ""
    if text and "\n" not in text and text not in ("null", "undefined"):
        return text
    return UNKNOWN_REQ_IDS


def output_label(request: Request) -> str:
    """How `-v` prefixes a unit of work's lines: `01-02/T3`, a role, `check verify-tests`."""
    if request.kind == "task":
        return request.name
    if request.kind == "phase":
        return request.role or request.name
    kind = {"query": "check", "verdict": "verdict from"}.get(request.kind, request.kind)
    where = f" ({request.plan_id}/{request.task_id})" if request.task_id else ""
    return f"{kind} {request.name}{where}"


def banner_label(request: Request) -> str | None:
    if request.kind == "agent":
        return request.name
    if request.kind == "verdict" and request.verdict is not None:
        return request.verdict.ref
    if request.kind == "phase":
        return request.role
    if request.kind == "task":
        return f"{TASK_ROLE} ({request.name})"
    return None
