"""The `Runtime` protocol: the one seam between the state machine and the work it dispatches.

The machine decides *what* runs (which skill, agent, command, check, role work, task); a runtime
decides *how* (local executables, an agent CLI, a script in a test). Every call is bounded and
returns a typed `Outcome`; a failing unit of work is a failed `Outcome`, never an exception.
Runtimes raise only for programming errors (a malformed call).

This module also owns what every runtime shares: the verdict shape check, the liveness
banner, and the per-step role-context book; the request each unit of work receives is in
`looprail.runtime.request`, re-exported here.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypedDict, runtime_checkable

from pydantic import model_validator

from looprail.hostcall import UNKNOWN_REQ_IDS, roadmap_req_ids
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
    """The liveness line printed before any agent is spawned, worded as the contract gives it
    (docs/contract.md, "Dispatch"): the silence that follows is expected, not a freeze."""
    return (
        f"◆ Spawning {agent}... (runs in a subagent — no output until it returns; "
        "expected, not a freeze)"
    )


# How long agent work is silent before its liveness banner is printed: work that returns
# sooner (a 40 ms script) never shows it, and with -v a line it prints first cancels it.
BANNER_AFTER_S = 2.0


class Liveness:
    """The liveness banner of one unit of agent work: `show(line)` once the work has been
    silent for `after_s` (at once when `after_s` <= 0), never after `heard()` or `close()`."""

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

    def heard(self) -> None:
        """The work printed a line (shown with -v): its output shows it is alive."""
        self.close()

    def close(self) -> None:
        """The work ended: no banner from now on (the timer's thread is gone on return)."""
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
    """What a runtime passes on to `Outcome.succeeded` / `Outcome.failed` beside the verdict."""

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


class RoleContextBook:
    """Contribution fragments queued per role, scoped to one (phase, step).

    A fragment delivered at any point of a step is handed verbatim, in delivery order, to every
    later piece of that role's work in that step only; the same text twice is kept once (a wave
    contribution is re-dispatched at every wave). Execute points may contribute `into:
    verifier` (host contract): those are kept for verify, where the verifier works. Thread-safe.
    """

    # (step, role) → the step whose work reads what that role is given at that step's points
    _CARRIED: ClassVar[Mapping[tuple[str, str], str]] = {("execute", "verifier"): "verify"}

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: dict[tuple[str, str], dict[str, list[str]]] = {}

    def deliver(self, role: str, text: str, ctx: DispatchContext) -> None:
        """Queue `text` for `role` in the step of `ctx.point`."""
        if not role:
            raise ValueError("deliver_context needs a role")
        if ctx.point is None:
            raise ValueError("deliver_context needs ctx.point (the contribution's point)")
        step = step_of(ctx.point)
        step = self._CARRIED.get((step, role), step)
        with self._lock:
            texts = self._texts.setdefault((ctx.phase_number, step), {}).setdefault(role, [])
            if text not in texts:
                texts.append(text)

    def for_role(self, role: str, step: str, ctx: DispatchContext) -> tuple[str, ...]:
        """Everything queued for `role` in this phase's `step`, in delivery order."""
        with self._lock:
            return tuple(self._texts.get((ctx.phase_number, step), {}).get(role, ()))


class RuntimeInfo(Frozen):
    """What a runtime declares about itself, read by the machine instead of probing for
    attributes (`BaseRuntime.describe`). A runtime that declares nothing gets these defaults."""

    #: The name a run journals as its agent (`machine_config.agent`) and resumes compare.
    name: str
    #: Plans work in git worktrees unless the config's `looprail.worktrees` says otherwise
    #: (agent CLIs edit files; a plan's edits must not meet another's).
    wants_worktrees: bool = False


@dataclass(frozen=True)
class RunStart:
    """What a runtime is told when a run begins (`begin_run`): everything arrives here, so the
    machine never assigns onto the runtime. `meter` tallies agent work against the budget; a
    runtime that spends nothing ignores it."""

    run_id: str | None
    meter: Meter | None = None


@runtime_checkable
class Runtime(Protocol):
    """What the state machine calls: `handle` behind the typed calls, a declared description,
    and the run hooks. Every unit of work is bounded and returns an `Outcome`, failed or not,
    never an exception. `BaseRuntime` writes it all once (docs/runtime.md).
    """

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        """Do the unit of work `request` describes."""

    # -- what it declares -------------------------------------------------------------------

    def describe(self) -> RuntimeInfo:
        """Its name and wishes (worktrees), declared once."""

    def unready(self) -> str | None:
        """Why it cannot run at all (an agent CLI not on PATH), or None; asked before a run."""

    def missing(self, folder: str | None, name: str) -> str | None:
        """Why a named unit (`agents/<name>`, …) would not run, or None (what lint probes)."""

    def host_tool_for(self, ctx: DispatchContext) -> str | None:
        """The host tool (`gsd_run`, …) that answers gates for `ctx`, or None."""

    def run_host(self, args: Sequence[str], ctx: DispatchContext) -> Outcome:
        """`<host tool> <args>` as one bounded process (gates the workflow hosts directly)."""

    def phase_req_ids(self, ctx: DispatchContext) -> str:
        """The phase's requirement ids as the host's plan-phase workflow passes them."""

    # -- run hooks --------------------------------------------------------------------------

    def begin_run(self, run: RunStart) -> None:
        """Told once a run id is known, before any work (transcripts, the cost meter)."""

    def end_run(self) -> None:
        """Told when the run is over, however it ended; later calls belong to no run."""

    # -- the typed calls (written once in BaseRuntime on top of `handle`) --------------------

    def run_skill(self, skill_id: str, ctx: DispatchContext) -> Outcome:
        """Run a skill step; `skill_id` is already prefixed with the flavor (`gsd-foo`)."""

    def spawn_agent(self, agent: str, ctx: DispatchContext) -> Outcome:
        """Spawn an agent step (its liveness banner if it runs silent for a while)."""

    def run_command(self, words: Sequence[str], ctx: DispatchContext) -> Outcome:
        """Run a grammar-checked `ref.command` (split on spaces) with `--phase <N> --raw`."""

    def run_query_check(self, words: Sequence[str], ctx: DispatchContext) -> Outcome:
        """Run a gate's `check.query`; ok means a `{block, message}` verdict is in `data`."""

    def ask_verdict(self, agent_verdict: Mapping[str, Any], ctx: DispatchContext) -> Outcome:
        """Ask an agent for an advisory `agentVerdict` (`{ref, prompt}`)."""

    def do_phase_work(self, role: str, step: str, ctx: DispatchContext) -> Outcome:
        """The step's main work by a role agent (orchestrator, planner, verifier)."""

    def execute_task(self, task: TaskWork, ctx: DispatchContext) -> Outcome:
        """The executor role runs one task."""

    def deliver_context(self, role: str, text: str, ctx: DispatchContext) -> None:
        """Queue a contribution fragment, verbatim, into `role`'s context for this step."""

    def deliver_message(
        self, text: str, *, send_as: str, delivery: str, trigger_turn: bool, ctx: DispatchContext
    ) -> Outcome:
        """Deliver a native-hook message to the agent session."""

    def compact(self, instructions: str | None, ctx: DispatchContext) -> Outcome:
        """Ask the agent session to compact its context."""


class BaseRuntime:
    """The typed `Runtime` calls, written once; a runtime implements one method, `handle`.

    Each call builds the `Request` a unit of work receives (the same value for every runtime,
    so a test runtime cannot drift from a real one) and hands it to `handle(request, ctx)`;
    `ctx` carries what is not the unit's business (timeouts, host tool, environment, folder).
    Hooks a subclass may override: `own(ctx)` (normalise or refuse a context),
    `verdict_label(request, ctx)` (how a verdict error names the unit), `recorded(...)` (see
    every delivered context fragment); `announce(request)` times the liveness banner. What the
    machine asks beside the work (`describe`, `unready`, `missing`, the host tool, the run
    hooks) has a default here: the machine calls these methods, never probes for attributes.
    """

    #: The name this runtime is registered under (`looprail.runtimes` entry points).
    name: ClassVar[str] = ""
    #: Seconds of silence before agent work's liveness banner (`announce`); 0: at once.
    banner_after_s: float = BANNER_AFTER_S

    def __init__(self, *, progress: Any = None, output: Any = None) -> None:
        self.progress = progress
        # `output(label, stream, line)`: each line a unit of work prints, as it prints it
        # (`-v`); None shows nothing. `label` names the unit (`output_label`).
        self.output = output
        self._context = RoleContextBook()

    # -- the one method -------------------------------------------------------------------

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        """Do the unit of work `request` describes; a failure is a failed `Outcome`."""
        raise NotImplementedError(f"{type(self).__name__} does not implement handle()")

    # -- hooks ----------------------------------------------------------------------------

    def own(self, ctx: DispatchContext) -> DispatchContext:
        return ctx

    def verdict_label(self, request: Request, ctx: DispatchContext) -> str:
        return f"{request.kind} {request.name!r}"

    # -- what it declares (defaults) --------------------------------------------------------

    def describe(self) -> RuntimeInfo:
        """Default: named as registered (else by its class), no worktrees."""
        return RuntimeInfo(name=self.name or type(self).__name__)

    def unready(self) -> str | None:
        """Default: always ready."""
        return None

    def missing(self, folder: str | None, name: str) -> str | None:
        """Why a named unit (`agents/<name>`, `checks/<word>`…) would not run, or None when
        this runtime resolves names itself (what `looprail lint` probes)."""
        return None

    def host_tool_for(self, ctx: DispatchContext) -> str | None:
        """Default: no host tool answers; gates are evaluated by looprail itself."""
        return None

    def run_host(self, args: Sequence[str], ctx: DispatchContext) -> Outcome:
        """Default: there is no host tool to call."""
        return Outcome.failed("no host tool is configured")

    def phase_req_ids(self, ctx: DispatchContext) -> str:
        """Default: the ROADMAP.md section's ids, "TBD" (the workflow's fallback) when none."""
        return roadmap_req_ids(ctx.project, ctx.phase_number) or UNKNOWN_REQ_IDS

    def recorded(self, role: str, text: str, ctx: DispatchContext) -> None:
        """Called after a context fragment was queued (a test runtime records it)."""

    def line_sink(
        self,
        request: Request,
        show: Callable[[str], str | None] | None = None,
        liveness: Liveness | None = None,
    ) -> Callable[[str, str], None] | None:
        """What `-v` is handed each line a unit of work prints, labelled (None without `-v`);
        `show` reads a stdout line into words first (an agent CLI's JSON events). A line
        shown cancels the work's `liveness` banner."""
        output = self.output
        if output is None:
            return None
        label = output_label(request)

        def sink(stream: str, text: str) -> None:
            if liveness is not None:
                liveness.heard()
            if show is None:
                output(label, stream, text)
                return
            shown = show(text) if stream == "stdout" else text
            for part in (shown or "").splitlines():  # an event's text may hold many lines
                output(label, stream, part)

        return sink

    def announce(self, request: Request) -> Liveness:
        """The liveness banner for an agent-backed request (agent, verdict, phase, task),
        printed once the work has been silent for `banner_after_s`; other kinds have none.
        The caller closes it when the work ends."""
        label = banner_label(request)
        line = spawn_banner(label) if label is not None else None
        return Liveness(self.progress, line, self.banner_after_s)

    # -- the typed calls (the `Runtime` protocol) -----------------------------------------

    def run_skill(self, skill_id: str, ctx: DispatchContext) -> Outcome:
        ctx = self.own(ctx)
        return self.handle(build_request("skill", skill_id, ctx), ctx)

    def spawn_agent(self, agent: str, ctx: DispatchContext) -> Outcome:
        ctx = self.own(ctx)
        return self.handle(build_request("agent", agent, ctx), ctx)

    def run_command(self, words: Sequence[str], ctx: DispatchContext) -> Outcome:
        ctx = self.own(ctx)
        words = checked_words(words)
        return self.handle(build_request("command", " ".join(words), ctx, words=words), ctx)

    def run_query_check(self, words: Sequence[str], ctx: DispatchContext) -> Outcome:
        ctx = self.own(ctx)
        words = checked_words(words)
        request = build_request("query", " ".join(words), ctx, words=words)
        return require_verdict(self.handle(request, ctx), self.verdict_label(request, ctx))

    def ask_verdict(self, agent_verdict: Mapping[str, Any], ctx: DispatchContext) -> Outcome:
        ctx = self.own(ctx)
        ask = verdict_ask(agent_verdict)
        if isinstance(ask, str):
            return Outcome.failed(ask)
        request = build_request("verdict", ask.ref, ctx, verdict=ask)
        return require_verdict(self.handle(request, ctx), self.verdict_label(request, ctx))

    def do_phase_work(self, role: str, step: str, ctx: DispatchContext) -> Outcome:
        ctx = self.own(ctx)
        if not step:
            raise ValueError("do_phase_work needs a step")
        texts = self._context.for_role(role, step, ctx)
        request = build_request(
            "phase", step, ctx, role=role, step=step, role_context={role: texts}
        )
        return self.handle(request, ctx)

    def execute_task(self, task: TaskWork, ctx: DispatchContext) -> Outcome:
        ctx = self.own(ctx)
        texts = self._context.for_role(TASK_ROLE, "execute", ctx)
        request = build_request(
            "task",
            task.key,
            ctx,
            plan_id=task.plan_id,
            task_id=task.task_id,
            role=TASK_ROLE,
            step="execute",
            role_context={TASK_ROLE: texts},
            task=task,
        )
        return self.handle(request, ctx)

    def deliver_context(self, role: str, text: str, ctx: DispatchContext) -> None:
        ctx = self.own(ctx)
        self._context.deliver(role, text, ctx)
        self.recorded(role, text, ctx)

    def deliver_message(
        self, text: str, *, send_as: str, delivery: str, trigger_turn: bool, ctx: DispatchContext
    ) -> Outcome:
        ctx = self.own(ctx)
        message = message_ask(text, send_as=send_as, delivery=delivery, trigger_turn=trigger_turn)
        return self.handle(build_request("message", SESSION_NAME, ctx, message=message), ctx)

    def compact(self, instructions: str | None, ctx: DispatchContext) -> Outcome:
        ctx = self.own(ctx)
        request = build_request("compact", SESSION_NAME, ctx, instructions=instructions)
        return self.handle(request, ctx)

    # -- run hooks ------------------------------------------------------------------------

    def begin_run(self, run: RunStart) -> None:
        """Told once a run id is known (transcripts are filed under it); default: nothing."""

    def end_run(self) -> None:
        """Told when the run is over, however it ended; default: nothing."""


def output_label(request: Request) -> str:
    """How `-v` prefixes the lines a unit of work prints: the task id for a task (`01-02/T3`),
    the role for a step's work, else the kind and name (`check verify-tests`)."""
    if request.kind == "task":
        return request.name
    if request.kind == "phase":
        return request.role or request.name
    kind = {"query": "check", "verdict": "verdict from"}.get(request.kind, request.kind)
    where = f" ({request.plan_id}/{request.task_id})" if request.task_id else ""
    return f"{kind} {request.name}{where}"


def banner_label(request: Request) -> str | None:
    """Who the liveness banner names for `request`, or None for work that spawns no agent."""
    if request.kind == "agent":
        return request.name
    if request.kind == "verdict" and request.verdict is not None:
        return request.verdict.ref
    if request.kind == "phase":
        return request.role
    if request.kind == "task":
        return f"{TASK_ROLE} ({request.name})"
    return None
