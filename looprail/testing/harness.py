"""`LoopHarness`: a throwaway project in a temp folder, a scripted runtime, and two questions a
capability author asks — "is this transition allowed?" and "what does a whole loop do?" —
answered by the real machine (the real resolver, dispatcher, chart and guards), with no
subprocess except the ones a predicate or a task-content resolver really runs.

    def test_ui_gate_refuses_plan_to_execute(loop_harness):
        h = loop_harness
        h.capability({"id": "ui", "gates": [{"point": "plan:post", "blocking": True,
                      "onError": "halt", "check": {"query": "ui plan-gate"}}]})
        h.plan("01")
        h.verdict("ui", block=True, message="no UI-SPEC.md")
        result = h.transition("plan", "execute")
        assert not result.allowed and result.refused_by == "ui"

See docs/testing.md.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from looprail.errors import HaltError, ManifestError, UsageError
from looprail.hooks.manifest import validate_manifest
from looprail.layout import LOOPRAIL_DIR, PHASES_DIR, PROJECT_CONFIG_FILE
from looprail.machine.guards import HookResult
from looprail.machine.loading import Loaded
from looprail.machine.progress import Progress
from looprail.machine.record import MemoryRecorder
from looprail.machine.run import LoopRunner, RunContext, RunOptions
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec, TransitionSpec
from looprail.plans import compute_waves
from looprail.runtime.base import Outcome, Request, RunStart, RuntimeInfo
from looprail.runtime.scripted import Call, CallKind, ScriptedRuntime
from looprail.trust import load_compiled

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet
    from looprail.machine.record import MemoryRecorder
    from looprail.machine.run import LoopRunner, RunOptions, RunResult
    from looprail.runtime.base import Flavor
    from looprail.store.models import EventRecord

PHASE_FOLDER = "01-test"


# --------------------------------------------------------------------------- plan text


def task(
    name: str,
    *,
    action: str | None = None,
    tracker_id: str | None = None,
    read_first: Sequence[str] = (),
    files: Sequence[str] = (),
    type: str = "auto",
    gate: str | None = None,
    verify: str = "it works",
    done: str | None = None,
) -> dict[str, Any]:
    """One task for `plan_markdown` / `LoopHarness.plan`."""
    return {
        "name": name,
        "action": action or f"Do {name}.",
        "tracker_id": tracker_id,
        "read_first": list(read_first),
        "files": list(files),
        "type": type,
        "gate": gate,
        "verify": verify,
        "done": done or f"{name} done",
    }


def plan_markdown(
    plan: str = "01",
    *,
    phase: str = PHASE_FOLDER,
    tasks: Sequence[Mapping[str, Any] | str] = ("Task one",),
    depends_on: Sequence[str] = (),
    files_modified: Sequence[str] = (),
    wave: int | None = None,
    autonomous: bool | None = None,
    objective: str = "Test plan.",
) -> str:
    """A GSD `PLAN.md` (frontmatter + `<tasks>`), as looprail's parser reads it."""
    items = [task(t) if isinstance(t, str) else task(**t) for t in tasks]
    if autonomous is None:
        autonomous = not any(t["type"].startswith("checkpoint:") for t in items)
    front = [
        "---",
        f"phase: {phase}",
        f'plan: "{plan}"',
        "type: execute",
        *([f"wave: {wave}"] if wave is not None else []),
        f"depends_on: {json.dumps(list(depends_on))}",
        f"files_modified: {json.dumps(list(files_modified))}",
        f"autonomous: {'true' if autonomous else 'false'}",
        "requirements: [TEST-1]",
        "---",
        "",
        "<objective>",
        objective,
        "</objective>",
        "",
        "<tasks>",
    ]
    for t in items:
        attrs = f'type="{t["type"]}"'
        if t["gate"]:
            attrs += f' gate="{t["gate"]}"'
        if t["tracker_id"]:
            attrs += f' tracker-id="{t["tracker_id"]}"'
        front += [
            f"<task {attrs}>",
            f"<name>{t['name']}</name>",
            f"<files>{', '.join(t['files'])}</files>",
            f"<read_first>{', '.join(t['read_first'])}</read_first>",
            f"<action>{t['action']}</action>",
            f"<verify>{t['verify']}</verify>",
            f"<done>{t['done']}</done>",
            "</task>",
        ]
    front += ["</tasks>", ""]
    return "\n".join(front)


# --------------------------------------------------------------------------- results


@dataclass
class TransitionResult:
    """One transition attempt. Truthy when allowed."""

    event: str
    state_before: list[str]
    state_after: list[str]
    allowed: bool
    refused_by: str | None = None  # capId of the hook that refused
    refusal: HookResult | None = None
    message: str = ""  # the refusing hook's message, or why a plan-fact guard refused
    reason: str | None = None  # the runner's one-line halt reason
    guard: str | None = None  # the plan-fact guard that refused (e.g. plans_ready)
    results: list[HookResult] = field(default_factory=list)  # every hook dispatched, in order
    calls: list[Call] = field(default_factory=list, repr=False)  # runtime calls of this attempt

    def __bool__(self) -> bool:
        return self.allowed

    @property
    def blocked(self) -> bool:
        """Refused by a verdict: a blocking gate answered `block`, or a native :pre hook
        blocked. This is what a refusal test means; `errored` is the wrong reason to refuse."""
        r = self.refusal
        return r is not None and r.status == "block"

    @property
    def errored(self) -> bool:
        """Refused because something broke, not by a verdict: a gate's check errored (a typo
        in a query, a predicate whose artifact path is invalid…) with onError halt, or a step
        failed with onError halt."""
        r = self.refusal
        return r is not None and r.status in ("error", "failed")

    @property
    def errors(self) -> list[HookResult]:
        """Every dispatched hook whose check errored or whose step failed, refusing or not
        (an advisory or onError skip gate whose check errored does not refuse, but is here)."""
        return [r for r in self.results if r.status in ("error", "failed")]

    def result_of(self, cap_id: str, kind: str | None = None) -> HookResult:
        """The dispatched result of `cap_id`'s hook (of `kind`), or KeyError."""
        for r in self.results:
            if r.cap_id == cap_id and (kind is None or r.kind == kind):
                return r
        raise KeyError(f"no {kind or 'hook'} of {cap_id!r} was dispatched ({self._seen()})")

    def _seen(self) -> str:
        return ", ".join(f"{r.kind} {r.cap_id}" for r in self.results) or "none"


@dataclass
class HarnessRun:
    """A whole loop run: the runner's result, the events it recorded, the runtime calls, and
    `log`, one line per event and call in the order they happened."""

    result: RunResult
    events: list[EventRecord]
    calls: list[Call]
    log: list[str]

    @property
    def status(self) -> str:
        return self.result.status

    @property
    def shipped(self) -> bool:
        return self.result.status == "shipped"

    @property
    def reason(self) -> str | None:
        return self.result.reason

    @property
    def refused_by(self) -> str | None:
        r = self.result.refused_by
        return r.cap_id if r is not None else None

    def calls_of(self, kind: str) -> list[Call]:
        return [c for c in self.calls if c.kind == kind]

    def index(self, prefix: str) -> int:
        """Where the first log line starting with `prefix` is (ValueError if none)."""
        for i, line in enumerate(self.log):
            if line.startswith(prefix):
                return i
        raise ValueError(f"nothing in the log starts with {prefix!r}; log:\n" + "\n".join(self.log))

    def before(self, first: str, then: str) -> bool:
        """Did the first log line starting with `first` come before the one starting with
        `then`?"""
        return self.index(first) < self.index(then)


# --------------------------------------------------------------------------- logging wrappers


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        with self._lock:
            self.lines.append(line)


class _LoggedRuntime:
    """Delegates to the ScriptedRuntime, writing one log line per call of the work first. The
    whole `Runtime` protocol is spelled out: the machine calls declared methods only."""

    def __init__(self, inner: ScriptedRuntime, log: _Log):
        self._inner = inner
        self._log = log

    def handle(self, request: Request, ctx: Any) -> Outcome:
        return self._inner.handle(request, ctx)

    def describe(self) -> RuntimeInfo:
        return self._inner.describe()

    def unready(self) -> str | None:
        return self._inner.unready()

    def missing(self, folder: str | None, name: str) -> str | None:
        return self._inner.missing(folder, name)

    def host_tool_for(self, ctx: Any) -> str | None:
        return self._inner.host_tool_for(ctx)

    def run_host(self, args: Sequence[str], ctx: Any) -> Outcome:
        return self._inner.run_host(args, ctx)

    def phase_req_ids(self, ctx: Any) -> str:
        return self._inner.phase_req_ids(ctx)

    def begin_run(self, run: RunStart) -> None:
        self._inner.begin_run(run)

    def end_run(self) -> None:
        self._inner.end_run()

    def deliver_message(
        self, text: str, *, send_as: str, delivery: str, trigger_turn: bool, ctx: Any
    ) -> Outcome:
        return self._inner.deliver_message(
            text, send_as=send_as, delivery=delivery, trigger_turn=trigger_turn, ctx=ctx
        )

    def compact(self, instructions: str | None, ctx: Any) -> Outcome:
        return self._inner.compact(instructions, ctx)

    def run_skill(self, skill_id: str, ctx: Any) -> Outcome:
        self._log.add(f"skill {skill_id}")
        return self._inner.run_skill(skill_id, ctx)

    def spawn_agent(self, agent: str, ctx: Any) -> Outcome:
        self._log.add(f"agent {agent}")
        return self._inner.spawn_agent(agent, ctx)

    def run_command(self, words: Sequence[str], ctx: Any) -> Outcome:
        self._log.add(f"command {' '.join(words)}")
        return self._inner.run_command(words, ctx)

    def run_query_check(self, words: Sequence[str], ctx: Any) -> Outcome:
        self._log.add(f"query {' '.join(words)}")
        return self._inner.run_query_check(words, ctx)

    def ask_verdict(self, agent_verdict: Mapping[str, Any], ctx: Any) -> Outcome:
        self._log.add(f"verdict {agent_verdict.get('ref')}")
        return self._inner.ask_verdict(agent_verdict, ctx)

    def do_phase_work(self, role: str, step: str, ctx: Any) -> Outcome:
        self._log.add(f"phase {step} ({role})")
        return self._inner.do_phase_work(role, step, ctx)

    def execute_task(self, task: Any, ctx: Any) -> Outcome:
        self._log.add(f"task {task.key}")
        return self._inner.execute_task(task, ctx)

    def deliver_context(self, role: str, text: str, ctx: Any) -> None:
        self._log.add(f"context {role} ({ctx.cap_id})")
        return self._inner.deliver_context(role, text, ctx)


def _event_line(e: Any) -> str | None:
    """One log line per recorder event worth reading (None: not logged)."""
    if e.kind == "point":
        wave = f" (wave {e.wave})" if e.wave is not None else ""
        return f"point {e.point}{wave}"
    if e.kind == "hook":
        return f"hook {e.hook_kind} {e.cap_id} {e.outcome}"
    if e.kind == "native_hook":
        return f"native {e.cap_id} {e.outcome}"
    if e.kind == "transition":
        return f"transition {e.data.get('event')} → {'/'.join(e.data.get('target') or ())}"
    if e.kind == "resolver":
        return f"resolver {e.task_id} {e.data.get('trackerId')} {e.outcome}"
    if e.kind == "read_first":
        return f"read_first {e.task_id}"
    if e.kind == "task_finished":
        return f"task_finished {e.task_id} {e.outcome}"
    if e.kind == "halted":
        return f"halted {e.message}"
    return None


def _logged_recorder(log: _Log) -> MemoryRecorder:
    class LoggedRecorder(MemoryRecorder):
        def event(self, record: Any, *, state: Sequence[str] | None = None) -> None:
            line = _event_line(record)
            if line is not None:
                log.add(line)
            super().event(record, state=state)

        def task_finished(
            self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
        ) -> None:
            log.add(f"task_finished {key} {status}")
            super().task_finished(key, status=status, duration_ms=duration_ms, message=message)

    return LoggedRecorder()


# --------------------------------------------------------------------------- the harness


class LoopHarness:
    """A project in `root` (`root/project`), first-party capabilities in `root/capabilities`,
    and a `ScriptedRuntime` (`self.runtime`) every call goes to. Phase 1 lives in
    `.planning/phases/01-test/`.

    Discuss and verify work is scripted to write `CONTEXT.md` / a passing `VERIFICATION.md`
    (replace with `runtime.effect(("phase", "verify"), fn)`); plans come from `plan()`.
    """

    def __init__(self, root: str | Path, *, spec: LoopSpec = DEFAULT_LOOP, flavor: Flavor = "gsd"):
        self.root = Path(root)
        self.project = self.root / "project"
        self.capabilities_dir = self.root / "capabilities"
        self.home = self.root / "home"
        self.phase_dir = self.project / PHASES_DIR / PHASE_FOLDER
        self.phase = "1"
        self.spec = spec
        self.flavor = flavor
        for d in (self.phase_dir, self.capabilities_dir, self.home, self.project / LOOPRAIL_DIR):
            d.mkdir(parents=True, exist_ok=True)
        self.runtime = ScriptedRuntime()
        self.runtime.effect(("phase", "discuss"), lambda _: self._default_artifact("CONTEXT.md"))
        self.runtime.effect(
            ("phase", "verify"), lambda _: self._default_artifact("VERIFICATION.md")
        )
        self._manifests: dict[str, dict[str, Any]] = {}
        self._config: dict[str, Any] = {}
        self.config({})

    # ------------------------------------------------------------------ building the project

    def capability(
        self,
        manifest: Mapping[str, Any],
        *,
        files: Mapping[str, str] | None = None,
    ) -> Path:
        """Write a capability (`manifest` needs only `id` and its hooks: role, version, title,
        description, tier, requires and runtimeCompat get defaults). Raises ManifestError,
        naming every problem, if the result is invalid."""
        if "id" not in manifest:
            raise UsageError("capability manifest needs an 'id'")
        cid = str(manifest["id"])
        full: dict[str, Any] = {
            "role": "feature",
            "version": "1.0.0",
            "title": cid,
            "description": f"test capability {cid}",
            "tier": "full",
            "requires": [],
            "runtimeCompat": {"supported": ["*"], "unsupported": []},
            **manifest,
        }
        folder = self.capabilities_dir / cid
        folder.mkdir(parents=True, exist_ok=True)
        for rel, text in (files or {}).items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        raw = json.dumps(full, indent=2).encode()
        (folder / "capability.json").write_bytes(raw)
        _, _, issues = validate_manifest(raw, str(folder / "capability.json"), folder)
        if issues:
            raise ManifestError(issues)
        self._manifests[cid] = full
        return folder

    def tracker(
        self,
        prefix: str,
        items: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        fail: str | None = None,
        cap_id: str | None = None,
    ) -> Path:
        """A capability whose `taskContentResolver` answers tracker-ids `prefix:<ID>` from
        `items` (`{ID: {"description": ..., "read_first": [...], ...}}`, the resolver output
        fields). An unknown ID, or `fail`, makes it exit non-zero (the loop halts). It runs as a
        real bounded process, as in production."""
        cid = cap_id or f"{prefix}-tracker"
        data = self.root / f"{cid}.json"
        data.write_text(json.dumps({"items": dict(items or {}), "fail": fail}))
        script = self.root / f"{cid}.py"
        script.write_text(_RESOLVER_SCRIPT)
        return self.capability(
            {
                "id": cid,
                "taskContentResolver": {
                    "trackerPrefix": prefix,
                    "invoke": {
                        "binary": sys.executable,
                        "args": [str(script), str(data), "{{id}}"],
                        "timeoutMs": 30000,
                    },
                },
            }
        )

    def config(self, values: Mapping[str, Any] | None = None, /, **keys: Any) -> dict[str, Any]:
        """Replace `.planning/config.json` with `values` (dotted `keys` are set into it too:
        `config(**{"release.allow_ship": True})`). Returns the config."""
        config: dict[str, Any] = json.loads(json.dumps(dict(values or {})))
        for key, value in keys.items():
            _set_dotted(config, key, value)
        self._config = config
        path = self.project / PROJECT_CONFIG_FILE
        path.write_text(json.dumps(config, indent=2))
        return config

    def set(self, key: str, value: Any) -> dict[str, Any]:
        """Set one dotted key in the config, keeping the rest."""
        config = json.loads(json.dumps(self._config))
        _set_dotted(config, key, value)
        return self.config(config)

    def plan(self, plan: str = "01", *, text: str | None = None, **fields: Any) -> Path:
        """Write `01-<plan>-PLAN.md` into the phase (`text` as is, or built by `plan_markdown`
        from `tasks=[...]`, `depends_on`, `files_modified`, `wave`, ...)."""
        path = self.phase_dir / f"01-{plan}-PLAN.md"
        path.write_text(text if text is not None else plan_markdown(plan, **fields))
        return path

    def summary(self, plan: str = "01") -> Path:
        """Mark plan `plan` done (its SUMMARY.md), as a finished wave leaves it."""
        path = self.phase_dir / f"01-{plan}-SUMMARY.md"
        path.write_text(f"---\nplan: 01-{plan}\nstatus: complete\n---\n")
        return path

    def artifact(
        self, name: str, text: str = "", *, frontmatter: Mapping[str, Any] | None = None
    ) -> Path:
        """Write a phase artifact (`CONTEXT.md`, `VERIFICATION.md`, `SECURITY.md`, ...)."""
        body = text
        if frontmatter is not None:
            body = "---\n" + yaml.safe_dump(dict(frontmatter), sort_keys=True) + "---\n" + text
        path = self.phase_dir / name
        path.write_text(body)
        return path

    def file(self, rel: str, text: str = "", *, executable: bool = False) -> Path:
        """Write a file of the project (`.looprail/checks/x`, a file a task reads first...)."""
        path = self.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if executable:
            path.chmod(0o755)
        return path

    # ------------------------------------------------------------------ scripting

    def script(self, key: tuple[str, str], value: Any) -> None:
        """`runtime.script(key, value)`: what a skill, agent, command, query, task... answers."""
        self.runtime.script(key, value)

    def verdict(
        self,
        cap_id: str,
        *,
        block: bool = False,
        message: str = "",
        point: str | None = None,
        error: str | None = None,
        unavailable: bool = False,
    ) -> None:
        """Script the verdict of `cap_id`'s query and agentVerdict gates (at `point`, or all):
        `block`/`message` as the check would print them, or `error` (the check itself failed;
        `unavailable` makes it exit 69, "could not look"). Predicate gates are evaluated for
        real: set their config or files instead."""
        gates = [
            g
            for g in (self._manifests.get(cap_id) or {}).get("gates") or ()
            if point is None or g.get("point") == point
        ]
        if not gates:
            where = f" at {point}" if point else ""
            raise UsageError(f"capability {cap_id!r} has no gate{where} (declare it first)")
        if error is not None or unavailable:
            outcome = Outcome.failed(error or "could not look", exit_code=69 if unavailable else 1)
        else:
            outcome = Outcome.succeeded(data={"block": block, "message": message})
        for gate in gates:
            check = gate.get("check") or {}
            if "query" in check:
                self.runtime.script(("query", check["query"]), outcome)
            elif "agentVerdict" in check:
                self.runtime.script(("verdict", check["agentVerdict"]["ref"]), outcome)
            else:
                raise UsageError(
                    f"gate of {cap_id!r} at {gate.get('point')} is a predicate gate: it is "
                    "evaluated for real (set its config with config()/set() or its files with "
                    "artifact()/file())"
                )

    # ------------------------------------------------------------------ asking the machine

    def transition(
        self,
        source: str,
        target: str | None = None,
        *,
        event: str | None = None,
        wave: int | None = None,
        work_done: bool = True,
    ) -> TransitionResult:
        """Put a real `LoopRunner`'s chart in `source` and attempt the transition to `target`
        (or `event`): plan-fact guards, then every hook of the points it crosses (gates run
        their checks), then the chart's guards. Nothing else runs (no role work, no tasks).

        With `work_done` the source step's work is taken as done, as it is when a run gets
        there: a missing `CONTEXT.md` (discuss) or passing `VERIFICATION.md` (verify) is
        written first. Plans are never invented: write them with `plan()`."""
        spec_t = self._find(source, target, event)
        if work_done and spec_t.source == "discuss":
            self._default_artifact("CONTEXT.md")
        if work_done and spec_t.source == "verify":
            self._default_artifact("VERIFICATION.md")
        state = self._state_of(spec_t.source)
        log = _Log()
        runner = self._runner(state=state, log=log, wave=wave)
        if spec_t.event == "start_wave" and wave is None:
            wave = self._first_pending_wave(runner)
        # The attempt's results, refused or not, are the `hook` events it recorded.
        captured: list[HookResult] = []
        dispatch = runner.dispatcher.dispatch

        def capture(point: str, *, wave: int | None = None) -> list[HookResult]:
            results = dispatch(point, wave=wave)
            captured.extend(results)
            return results

        # Wrap this runner's bound method to see each attempt's results (one instance only).
        runner.dispatcher.dispatch = capture  # type: ignore[method-assign]
        calls_before = len(self.runtime.calls)
        before = list(runner.state)
        try:
            runner.attempt(spec_t.event, wave=wave)
        except HaltError as exc:
            refused = getattr(exc, "result", None)
            guard = getattr(exc, "guard", None)
            return TransitionResult(
                event=spec_t.event,
                state_before=before,
                state_after=list(runner.state),
                allowed=False,
                refused_by=refused.cap_id if refused is not None else None,
                refusal=refused,
                message=refused.message if refused is not None else str(exc).split(": ", 1)[-1],
                reason=str(exc),
                guard=guard,
                results=captured,
                calls=self.runtime.calls[calls_before:],
            )
        return TransitionResult(
            event=spec_t.event,
            state_before=before,
            state_after=list(runner.state),
            allowed=True,
            results=captured,
            calls=self.runtime.calls[calls_before:],
        )

    def run(
        self,
        *,
        autonomous: bool = False,
        approvals: Iterable[str] = (),
        jobs: int = 1,
        state: Sequence[str] | None = None,
    ) -> HarnessRun:
        """Run the whole loop for phase 1 (from `idle`, or from `state`) in memory: no
        journal, no lock."""
        log = _Log()
        options = RunOptions(
            flavor=self.flavor, jobs=jobs, autonomous=autonomous, approvals=frozenset(approvals)
        )
        runner = self._runner(state=state, log=log, options=options)
        calls_before = len(self.runtime.calls)
        result = runner.run()
        return HarnessRun(
            result=result,
            # `_runner` records in memory (`_logged_recorder`).
            events=list(cast("MemoryRecorder", runner.recorder).events),
            calls=self.runtime.calls[calls_before:],
            log=list(log.lines),
        )

    def calls_of(self, kind: CallKind) -> list[Call]:
        """Every runtime call of `kind` so far (skill, agent, command, query, verdict, phase,
        task, context...)."""
        return self.runtime.calls_of(kind)

    # ------------------------------------------------------------------ internals

    def _default_artifact(self, name: str) -> None:
        if any(p.name.endswith(name) for p in self.phase_dir.iterdir()):
            return
        body = "---\nstatus: passed\n---\n" if name == "VERIFICATION.md" else ""
        (self.phase_dir / name).write_text(body + f"# {name} (written by the test harness)\n")

    def _load(self) -> CapabilitySet:
        env: dict[str, str] = {}
        compiled = load_compiled(
            self.project, [self.capabilities_dir], env=env, home=self.home, use_cache=False
        )
        if compiled.failed:
            raise ManifestError(compiled.issues)
        return compiled

    def _runner(
        self,
        *,
        state: Sequence[str] | None,
        log: _Log,
        wave: int | None = None,
        options: RunOptions | None = None,
    ) -> LoopRunner:
        compiled = self._load()
        # As a run: every loaded resolver (no activationKey for execute:task), one with consent.
        resolvers = Loaded(self.project, compiled, self._config).resolvers
        return LoopRunner(
            RunContext(
                project=self.project,
                phase=self.phase,
                runtime=_LoggedRuntime(self.runtime, log),
                compiled=compiled,
                config=self._config,
                resolvers=resolvers,
                options=options or RunOptions(flavor=self.flavor, jobs=1),
                recorder=_logged_recorder(log),
                progress=Progress(quiet=True),
                spec=self.spec,
                state=state,
                wave=wave,
            )
        )

    def _find(self, source: str, target: str | None, event: str | None) -> TransitionSpec:
        parents = {"wave_ready", "wave_running", "waves_done"}
        looped = self.spec.looped

        def src_ok(t: TransitionSpec) -> bool:
            return t.source == source or (t.source == looped and source in parents)

        def tgt_ok(t: TransitionSpec) -> bool:
            return (
                target is None or t.target == target or (t.target == looped and target in parents)
            )

        found = [
            t
            for t in self.spec.transitions()
            if src_ok(t) and tgt_ok(t) and (event is None or t.event == event)
        ]
        if not found:
            known = ", ".join(
                f"{t.source} → {t.target} ({t.event})" for t in self.spec.transitions()
            )
            raise UsageError(f"no transition from {source!r} to {target!r}; the loop has: {known}")
        exact = [t for t in found if t.source == source] or found
        return exact[0]

    def _state_of(self, source: str) -> list[str]:
        inner = ("wave_ready", "wave_running", "waves_done")
        if source in inner:
            return [self.spec.looped, source]
        if source == self.spec.looped:
            return [self.spec.looped, "waves_done"]
        return [source]

    def _first_pending_wave(self, runner: Any) -> int | None:
        if not runner.phase.plans:
            return None
        waves = compute_waves(runner.phase.plans, root=self.project)
        return next((w.number for w in waves.waves if w.pending), None)


def _set_dotted(config: dict[str, Any], key: str, value: Any) -> None:
    node = config
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


_RESOLVER_SCRIPT = """\
import json, sys
data = json.load(open(sys.argv[1]))
if data.get("fail"):
    print(data["fail"], file=sys.stderr)
    sys.exit(2)
item = data["items"].get(sys.argv[2])
if item is None:
    print("unknown id " + sys.argv[2], file=sys.stderr)
    sys.exit(1)
print(json.dumps(item))
"""

__all__ = ["HarnessRun", "LoopHarness", "TransitionResult", "plan_markdown", "task"]
