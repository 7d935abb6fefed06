"""`LoopHarness`: a throwaway project, a scripted runtime, and the real machine (resolver,
dispatcher, chart and guards) answering "is this transition allowed?" and "what does a whole
loop do?", with no subprocess except those a predicate or a task-content resolver runs. See
docs/testing.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import yaml

from looprail.errors import HaltError, ManifestError, UsageError
from looprail.hooks.manifest import validate_manifest
from looprail.hooks.task_content import runnable_resolvers
from looprail.journal.recorder import MemoryRecorder
from looprail.layout import LOOPRAIL_DIR, PHASES_DIR, PROJECT_CONFIG_FILE
from looprail.machine.chart import WAVE_STATES
from looprail.machine.guards import HookResult
from looprail.machine.progress import Progress
from looprail.machine.runner import LoopRunner, RunContext, RunOptions
from looprail.machine.spec import DEFAULT_LOOP, LoopSpec, TransitionSpec
from looprail.plans import compute_waves
from looprail.runtime.base import DispatchContext, Outcome, Request, RequestKind
from looprail.runtime.scripted import Call, ScriptedRuntime
from looprail.testing.plantext import PHASE_FOLDER, plan_markdown
from looprail.testing.results import HarnessRun, TransitionResult
from looprail.trust import load_compiled

if TYPE_CHECKING:
    from looprail.hooks.capset import CapabilitySet
    from looprail.runtime.base import Flavor

# The artifact a step's work leaves (written by default: the harness scripts no real work).
_STEP_ARTIFACTS = {"discuss": "CONTEXT.md", "verify": "VERIFICATION.md"}


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
        self.runtime = LoggingRuntime()
        for step, name in _STEP_ARTIFACTS.items():
            self.runtime.effect(("phase", step), partial(self._default_artifact, name))
        self._manifests: dict[str, Mapping[str, Any]] = {}
        self._config: dict[str, object] = {}
        self.config({})

    # ------------------------------------------------------------------ building the project

    def capability(
        self, manifest: Mapping[str, Any], *, files: Mapping[str, str] | None = None
    ) -> Path:
        """Write a capability (`manifest` needs only `id` and its hooks: role, version, title,
        description, tier, requires and runtimeCompat get defaults). Raises ManifestError,
        naming every problem, if the result is invalid."""
        if "id" not in manifest:
            raise UsageError("capability manifest needs an 'id'")
        cid = str(manifest["id"])
        full: dict[str, object] = {
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
            _write(folder / rel, text)
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
        """A capability whose `taskContentResolver` (a real bounded process) answers tracker-ids
        `prefix:<ID>` from `items` (`{ID: {"description": ..., "read_first": [...]}}`); an
        unknown ID, or `fail`, makes it exit non-zero (the loop halts)."""
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
        return self.config(self._config, **{key: value})

    def plan(self, plan: str = "01", *, text: str | None = None, **fields: Any) -> Path:
        """Write `01-<plan>-PLAN.md` into the phase (`text` as is, or built by `plan_markdown`
        from `tasks=[...]`, `depends_on`, `files_modified`, `wave`, ...)."""
        text = text if text is not None else plan_markdown(plan, **fields)
        return _write(self.phase_dir / f"01-{plan}-PLAN.md", text)

    def summary(self, plan: str = "01") -> Path:
        """Mark plan `plan` done (its SUMMARY.md), as a finished wave leaves it."""
        text = f"---\nplan: 01-{plan}\nstatus: complete\n---\n"
        return _write(self.phase_dir / f"01-{plan}-SUMMARY.md", text)

    def artifact(
        self, name: str, text: str = "", *, frontmatter: Mapping[str, Any] | None = None
    ) -> Path:
        """Write a phase artifact (`CONTEXT.md`, `VERIFICATION.md`, `SECURITY.md`, ...)."""
        body = text
        if frontmatter is not None:
            body = "---\n" + yaml.safe_dump(dict(frontmatter), sort_keys=True) + "---\n" + text
        return _write(self.phase_dir / name, body)

    def file(self, rel: str, text: str = "", *, executable: bool = False) -> Path:
        """Write a file of the project (`.looprail/checks/x`, a file a task reads first...)."""
        path = _write(self.project / rel, text)
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
        if work_done and spec_t.source in _STEP_ARTIFACTS:
            self._default_artifact(_STEP_ARTIFACTS[spec_t.source])
        runner = self._runner(state=self._state_of(spec_t.source), wave=wave)
        if spec_t.event == "start_wave" and wave is None:
            wave = self._first_pending_wave(runner)
        captured = _capture_results(runner)
        calls_before = len(self.runtime.calls)
        before = list(runner.state)
        halt: HaltError | None = None
        try:
            runner.attempt(spec_t.event, wave=wave)
        except HaltError as exc:
            halt = exc
        result = TransitionResult(
            event=spec_t.event,
            state_before=before,
            state_after=list(runner.state),
            allowed=halt is None,
            results=captured,
            calls=self.runtime.calls[calls_before:],
        )
        if halt is not None:
            refused: HookResult | None = getattr(halt, "result", None)
            result.refusal = refused
            result.refused_by = refused.cap_id if refused is not None else None
            result.message = refused.message if refused else str(halt).split(": ", 1)[-1]
            result.reason = str(halt)
            result.guard = getattr(halt, "guard", None)
        return result

    def run(
        self,
        *,
        autonomous: bool = False,
        approvals: Iterable[str] = (),
        jobs: int = 1,
        state: Sequence[str] | None = None,
    ) -> HarnessRun:
        """Run the whole loop for phase 1 (from `idle`, or `state`) in memory: no journal."""
        options = RunOptions(
            flavor=self.flavor, jobs=jobs, autonomous=autonomous, approvals=frozenset(approvals)
        )
        runner = self._runner(state=state, options=options)
        calls_before = len(self.runtime.calls)
        result = runner.run()
        return HarnessRun(
            result=result,
            # `_runner` records in memory (`logged_recorder`).
            events=list(cast("MemoryRecorder", runner.recorder).events),
            calls=self.runtime.calls[calls_before:],
            log=list(self.runtime.log),
        )

    def calls_of(self, kind: RequestKind) -> list[Call]:
        """Every runtime call of `kind` (skill, agent, query, phase, task, ...) so far."""
        return self.runtime.calls_of(kind)

    # ------------------------------------------------------------------ internals

    def _default_artifact(self, name: str, _request: object = None) -> None:
        if any(p.name.endswith(name) for p in self.phase_dir.iterdir()):
            return
        body = "---\nstatus: passed\n---\n" if name == "VERIFICATION.md" else ""
        (self.phase_dir / name).write_text(body + f"# {name} (written by the test harness)\n")

    def _load(self) -> CapabilitySet:
        compiled = load_compiled(
            self.project, [self.capabilities_dir], env={}, home=self.home, use_cache=False
        )
        if compiled.failed:
            raise ManifestError(compiled.issues)
        return compiled

    def _runner(
        self,
        *,
        state: Sequence[str] | None,
        wave: int | None = None,
        options: RunOptions | None = None,
    ) -> LoopRunner:
        """A runner over the project as it is now, logging into a new `runtime.log`."""
        log = self.runtime.log = []
        compiled = self._load()
        resolvers = runnable_resolvers(compiled)  # as a run's
        return LoopRunner(
            RunContext(
                project=self.project,
                phase=self.phase,
                runtime=self.runtime,
                compiled=compiled,
                config=self._config,
                resolvers=resolvers,
                options=options or RunOptions(flavor=self.flavor, jobs=1),
                recorder=logged_recorder(log),
                progress=Progress(quiet=True),
                spec=self.spec,
                state=state,
                wave=wave,
            )
        )

    def _find(self, source: str, target: str | None, event: str | None) -> TransitionSpec:
        transitions = self.spec.transitions()

        def fits(state: str, wanted: str | None) -> bool:  # a wave state is in the looped one
            return wanted in (None, state) or (state == self.spec.looped and wanted in WAVE_STATES)

        found = [
            t
            for t in transitions
            if fits(t.source, source) and fits(t.target, target) and event in (None, t.event)
        ]
        if not found:
            known = ", ".join(f"{t.source} → {t.target} ({t.event})" for t in transitions)
            raise UsageError(f"no transition from {source!r} to {target!r}; the loop has: {known}")
        exact = [t for t in found if t.source == source] or found
        return exact[0]

    def _state_of(self, source: str) -> list[str]:
        if source in WAVE_STATES:
            return [self.spec.looped, source]
        if source == self.spec.looped:
            return [self.spec.looped, "waves_done"]
        return [source]

    def _first_pending_wave(self, runner: Any) -> int | None:
        if not runner.phase.plans:
            return None
        waves = compute_waves(runner.phase.plans, root=self.project)
        return next((w.number for w in waves.waves if w.pending), None)


def _capture_results(runner: LoopRunner) -> list[HookResult]:
    """Every hook result `runner` (this instance only) dispatches from now on."""
    captured: list[HookResult] = []
    dispatch = runner.dispatcher.dispatch

    def capture(point: str, *, wave: int | None = None) -> list[HookResult]:
        results = dispatch(point, wave=wave)
        captured.extend(results)
        return results

    runner.dispatcher.dispatch = capture  # type: ignore[method-assign]
    return captured


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _set_dotted(config: dict[str, object], key: str, value: object) -> None:
    node = config
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[parts[-1]] = value


# The harness's log (`HarnessRun.log`): one line per call of the work and per recorder event
# worth reading, in the order they happened.


class LoggingRuntime(ScriptedRuntime):
    """A ScriptedRuntime that first writes one line per call of the work into `log` (the
    current run's; `list.append` is atomic, so a wave's parallel tasks may share it)."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        line = _call_line(request)
        if line is not None:
            self.log.append(line)
        return super().handle(request, ctx)


def _call_line(r: Request) -> str | None:
    """One log line per call of the work (None: not logged, the session's and the host's)."""
    if r.kind == "phase":
        return f"phase {r.step} ({r.role})"
    if r.kind == "context":
        return f"context {r.role} ({r.cap_id})"
    if r.kind in ("skill", "agent", "command", "query", "verdict", "task"):
        return f"{r.kind} {r.name}"
    return None


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
    if e.kind == "halted":
        return f"halted {e.message}"
    return None


def logged_recorder(log: list[str]) -> MemoryRecorder:
    """A MemoryRecorder that also writes a line into `log` per event worth reading."""

    class LoggedRecorder(MemoryRecorder):
        def event(self, record: Any, *, state: Sequence[str] | None = None) -> None:
            line = _event_line(record)
            if line is not None:
                log.append(line)
            super().event(record, state=state)

        def task_finished(
            self, key: str, *, status: str, duration_ms: int | None, message: str | None = None
        ) -> None:
            log.append(f"task_finished {key} {status}")
            super().task_finished(key, status=status, duration_ms=duration_ms, message=message)

    return LoggedRecorder()


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

__all__ = ["LoopHarness"]
