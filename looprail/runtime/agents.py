"""Coding agent CLIs as runtimes: one `AgentRuntime`, an `Adapter` per CLI (runtime/adapters.py).
Role work is one bounded CLI invocation (prompt from `runtime.prompts`, transcript under
`.looprail/logs/<run>/`); commands and queries run as with the local runtime. Each invocation is
a fresh session: messages are queued for the next prompt, and compact has nothing to do."""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from looprail.runtime.adapter import Adapter, AgentSettings, Reply, classify, cut, file_prompt
from looprail.runtime.adapters import ADAPTERS as ADAPTERS  # re-exported
from looprail.runtime.adapters import (
    ClaudeAdapter,
    CodexAdapter,
    GeminiAdapter,
    OpenCodeAdapter,
    describe,
)
from looprail.runtime.base import (
    BaseRuntime,
    DispatchContext,
    Outcome,
    OutcomeFields,
    Request,
    RunStart,
    RuntimeInfo,
    Usage,
    output_label,
    parse_json_object,
    require_verdict,
)
from looprail.runtime.git import is_git_repo
from looprail.runtime.interactive import (
    handover_line,
    run_on_terminal,
    session_outcome,
    shown_argv,
    terminal_problem,
    write_meta,
)
from looprail.runtime.local import LocalRuntime, Timeouts, last_line
from looprail.runtime.logs import OutputTee, Transcripts, write_prompt, write_transcript
from looprail.runtime.models import models_line, role_models
from looprail.runtime.owed import owed_problem
from looprail.runtime.process import (
    ProcessResult,
    escape_untrusted,
    exit_words,
    find_program,
    run_bounded,
)
from looprail.runtime.prompts import build_prompt

if TYPE_CHECKING:
    from looprail.runtime.meter import Meter

AGENT_OUTPUT_CAP = 32 << 20  # 32 MiB per stream: a long agent session, still bounded


class AgentRuntime(BaseRuntime):
    adapter_class: ClassVar[type[Adapter]] = Adapter

    def __init__(
        self,
        project: str | Path,
        *,
        settings: AgentSettings | Mapping[str, object] | None = None,
        timeouts: Timeouts | None = None,
        progress: Callable[[str], None] | None = None,
        host_tool: str | None = None,
        env: Mapping[str, str] | None = None,
        output: Callable[[str, str, str], None] | None = None,
        gsd_config: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(progress=progress, output=output)
        self.adapter = self.adapter_class()
        self.project = Path(project).resolve()
        if settings is None or isinstance(settings, Mapping):
            settings = AgentSettings.parse(self.adapter.name, settings or {})
        self.settings = settings
        # each role's model (`looprail.runtime.models`): GSD's keys in the project's config
        self.models = role_models(gsd_config, self.adapter.name, settings)
        self.local = LocalRuntime(
            self.project,
            host_tool=host_tool,
            timeouts=timeouts,
            progress=progress,
            env=env,
            output=output,
        )
        self.transcripts = Transcripts(self.project)
        self.local.transcripts = self.transcripts  # commands and checks: one numbering, one run
        self._meter: Meter | None = None  # the run's (`begin_run`); none outside a run
        self._messages: list[str] = []
        self._lock = threading.Lock()
        self._git = is_git_repo(self.project)

    @classmethod
    def from_settings(cls, settings: Any) -> AgentRuntime:
        return cls(
            settings.project,
            settings=settings.agent,
            timeouts=settings.timeouts,
            progress=settings.progress,
            host_tool=settings.host_tool,
            env=settings.env,
            output=getattr(settings, "output", None),
            gsd_config=getattr(settings, "config", None),
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.project)!r})"

    def describe(self) -> RuntimeInfo:
        """Worktrees; unready when the CLI is not on PATH (read before a run journals)."""
        env = {**os.environ, **self.local.env}
        binary = self.settings.exe(self.adapter.binary)
        return RuntimeInfo(
            name=self.name or type(self).__name__,
            wants_worktrees=True,
            host_tool=self.local.host_tool,
            unready=self._missing(binary) if find_program(binary, env) is None else None,
        )

    def _missing(self, binary: str) -> str:
        return (
            f"{self.adapter.name}: `{binary}` not found on PATH; {self.adapter.install} "
            "(`looprail doctor` checks it)"
        )

    def begin_run(self, run: RunStart) -> None:
        """A run resumed at its budget stops here, before any work (`BudgetReached`)."""
        self._meter = run.meter
        if run.meter is not None:
            run.meter.check()
        self.transcripts.run_id = run.run_id
        if self.progress is not None:
            self.progress(describe(self.adapter.name, self.settings))
            self.progress(models_line(self.models))

    def end_run(self) -> None:
        self._meter = None

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        request, ctx = self.local.own(request, ctx)
        if request.kind in ("command", "query", "host"):
            return self.local.handle(request, ctx)
        if request.kind == "message":
            assert request.message is not None
            with self._lock:
                self._messages.append(request.message.text)
            return Outcome.succeeded()
        if request.kind in ("compact", "context"):
            # every invocation is a fresh session; role work's prompt has the contributions
            return Outcome.succeeded()
        meter = self._meter
        if meter is not None:
            meter.check()
        with self._lock:
            messages, self._messages = tuple(self._messages), []
        talk = ctx.terminal and request.kind == "phase"  # `run --interactive`'s discuss
        prompt = build_prompt(
            request,
            self.project,
            messages=messages,
            skill_form=self.adapter.skill_form,
            agent_form=self.adapter.agent_form,
            conversation=talk,
        )
        env = self.local._environment(request, ctx)
        binary = self.settings.exe(self.adapter.binary)
        found = find_program(binary, env)
        if found is None:
            return Outcome.failed(self._missing(binary))
        folder = self.transcripts.folder(request)
        write_prompt(folder, prompt)
        if talk:
            return agent_session(
                self, request, ctx, prompt=prompt, folder=folder, binary=found, env=env
            )
        argv = self.adapter.invocation(request, self.settings_for(request), git=self._git)
        argv[0] = os.path.abspath(found)
        outcome = self._invoke(request, ctx, prompt, argv, folder, env)
        if request.kind != "verdict":
            return outcome
        return require_verdict(outcome, f"{self.adapter.name} verdict from {request.name}")

    def settings_for(self, request: Request) -> AgentSettings:
        """The settings of `request`'s call: its role's model in place of `model`."""
        known = self.models.get(request.role or "")
        return replace(self.settings, model=known.model) if known else self.settings

    def _invoke(
        self,
        request: Request,
        ctx: DispatchContext,
        prompt: str,
        argv: list[str],
        folder: Path,
        env: Mapping[str, str],
    ) -> Outcome:
        timeout_s = ctx.timeout_s or self.local.timeouts.for_kind(request.kind)
        result = self._run(request, ctx, argv, prompt, folder, env, timeout_s)
        reply = self.adapter.parse(result.stdout, result.stderr)
        rel = self.transcripts.rel(folder)
        usage, estimated = self._usage(reply)
        if reply.denials and self.progress is not None:
            self.progress(
                f"{self.adapter.name} refused {len(reply.denials)} tool call(s) in "
                f"{output_label(request)}: {'; '.join(reply.denials[:3])}"
            )
        outcome = self._outcome(request, result, reply, timeout_s, rel, usage)
        write_transcript(folder, argv, result, reply, outcome)
        self._record(
            request,
            outcome,
            rel,
            result.duration_s,
            sessionId=usage.session_id,
            inputTokens=usage.input_tokens,
            cachedInputTokens=usage.cached_input_tokens,
            outputTokens=usage.output_tokens,
            costUsd=usage.cost_usd,
            costEstimated=estimated,
            permissionDenials=reply.denials or None,
        )
        return outcome

    def _run(
        self,
        request: Request,
        ctx: DispatchContext,
        argv: list[str],
        prompt: str,
        folder: Path,
        env: Mapping[str, str],
        timeout_s: float,
    ) -> ProcessResult:
        """The CLI's run, its streams going to the transcript (and `-v`) as they arrive."""
        liveness = self.announce(request)
        tee = OutputTee(
            split={"stdout": folder / "stdout.jsonl", "stderr": folder / "stderr.txt"},
            on_line=self.line_sink(request, self.adapter.show, liveness),
        )
        try:
            return run_bounded(
                argv,
                timeout_s=timeout_s,
                stdin=prompt,
                cwd=ctx.workdir or self.project,
                env=env,
                output_cap=AGENT_OUTPUT_CAP,
                on_output=tee,
            )
        finally:
            tee.close()
            liveness.close()

    def _usage(self, reply: Reply) -> tuple[Usage, bool]:
        """What the invocation used, and whether its cost is an estimate: a CLI that reports
        no cost, or $0 (opencode and claude for a model they have no price for), is priced
        from its tokens when prices are configured."""
        estimate = self._estimate(reply) if not reply.cost_usd else None
        usage = Usage(
            agent=self.adapter.name,
            session_id=reply.session_id,
            input_tokens=reply.input_tokens,
            cached_input_tokens=reply.cached_input_tokens,
            output_tokens=reply.output_tokens,
            cost_usd=estimate if estimate is not None else reply.cost_usd,
        )
        return usage, estimate is not None

    def _record(
        self, request: Request, outcome: Outcome, rel: str, duration_s: float, **extra: object
    ) -> None:
        if self._meter is None:
            return
        call: dict[str, object] = {
            "agent": self.adapter.name,
            "kind": request.kind,
            "name": request.name,
            "planId": request.plan_id,
            "taskId": request.task_id,
            "role": request.role,
            "model": self.settings_for(request).model,
            "ok": outcome.ok,
            **extra,
            "transcript": rel,
            "durationMs": int(duration_s * 1000),
        }
        self._meter.record(call)

    def _outcome(
        self,
        request: Request,
        result: ProcessResult,
        reply: Reply,
        timeout_s: float,
        rel: str,
        usage: Usage,
    ) -> Outcome:
        common: OutcomeFields = {
            "stderr": result.stderr,
            "duration_s": result.duration_s,
            "truncated": result.truncated,
            "usage": usage,
            "transcript": rel,
        }
        why = self._failure(request, result, reply, timeout_s)
        if why is None:
            verdict = extract_verdict(reply.final) if request.kind == "verdict" else None
            common["stdout"] = json.dumps(verdict) if verdict is not None else reply.final
            return Outcome.succeeded(**common)
        last = last_line(reply.final.strip() or reply.error or "") or last_line(result.stderr)
        said = f"; last words: {last}" if last and last not in why else ""
        code = result.exit_code if result.exit_code not in (0, None) else None
        common["stdout"] = reply.final
        failed = Outcome.failed(f"{why}{said} (transcript: {rel})", exit_code=code, **common)
        return failed.model_copy(update={"timed_out": True}) if result.timed_out else failed

    def _failure(
        self, request: Request, result: ProcessResult, reply: Reply, timeout_s: float
    ) -> str | None:
        name = self.adapter.name
        code = result.exit_code
        if result.spawn_error:
            return f"{name}: could not start: {result.spawn_error}"
        if result.timed_out:
            return f"{name} timed out after {timeout_s:g}s and was killed"
        if reply.error:
            said = " ".join(escape_untrusted(reply.error).split())
            return f"{name}: {classify(reply.error, reply.error_status)}: {cut(said, 300)}"
        if code != 0:
            meaning = self.adapter.exit_reason(code) if code is not None and code > 0 else None
            return f"{name} {exit_words(code, meaning)}"
        if not reply.complete:
            return f"{name}: the output stream ended before the final result (cut off)"
        problem = owed_problem(request, self.project) if request.kind != "verdict" else None
        if problem is None:
            return None
        refused = f" ({name} refused: {'; '.join(reply.denials)})" if reply.denials else ""
        return f"{request.role or name} did not deliver: {problem}{refused}"

    def _estimate(self, reply: Reply) -> float | None:
        s = self.settings
        if s.input_usd_per_mtok is None or s.output_usd_per_mtok is None:
            return None
        if not reply.input_tokens and not reply.output_tokens:
            return None
        spent = (reply.input_tokens or 0) * s.input_usd_per_mtok
        spent += (reply.output_tokens or 0) * s.output_usd_per_mtok
        return round(spent / 1_000_000, 6)


def extract_verdict(text: str) -> dict[str, object] | None:
    """The `{block, message}` object in an agent's final text: the whole text, a fenced block,
    or the last line that is a JSON object."""
    candidates = [text]
    candidates += re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, flags=re.S)
    candidates += [line for line in reversed(text.splitlines()) if line.strip().startswith("{")]
    for c in candidates:
        found = parse_json_object(c)
        if found is not None and "block" in found:
            return found
    return None


class ClaudeRuntime(AgentRuntime):
    name = "claude"
    adapter_class = ClaudeAdapter


class CodexRuntime(AgentRuntime):
    name = "codex"
    adapter_class = CodexAdapter


class OpenCodeRuntime(AgentRuntime):
    name = "opencode"
    adapter_class = OpenCodeAdapter


class GeminiRuntime(AgentRuntime):
    name = "gemini"
    adapter_class = GeminiAdapter


@contextmanager
def readable_brief(adapter: Adapter, folder: Path, prompt: str) -> Iterator[tuple[Path, list[str]]]:
    """`(the brief file an interactive CLI is told to read, the args it needs to)`: the logs
    folder's prompt.md, or for a CLI whose read tool refuses files git ignores, a copy in a
    private folder outside the project (0700, the file 0600), removed when the session ends."""
    if adapter.reads_ignored_files:
        yield folder / "prompt.md", []
        return
    with tempfile.TemporaryDirectory(prefix="looprail-brief-") as private:
        yield write_prompt(Path(private), prompt), adapter.folder_args(Path(private))


def agent_session(
    rt: AgentRuntime,
    request: Request,
    ctx: DispatchContext,
    *,
    prompt: str,
    folder: Path,
    binary: str,
    env: Mapping[str, str],
) -> Outcome:
    """One phase step as a conversation in the agent CLI's interactive mode."""
    name = rt.adapter.name
    problem = terminal_problem()
    if problem is not None:
        return Outcome.failed(f"{name}: an interactive session needs a terminal: {problem}")
    with readable_brief(rt.adapter, folder, prompt) as (brief, extra):
        given = file_prompt(brief)  # stdin is the terminal: the CLI reads the file
        settings = rt.settings_for(request)
        argv = [*rt.adapter.interactive_argv(given, request, settings, git=rt._git), *extra]
        argv[0] = os.path.abspath(binary)
        shown = shown_argv(argv, given)
        if rt.progress is not None:
            rt.progress(handover_line(name, shown, request, rt.project))
        session = run_on_terminal(
            argv, cwd=ctx.workdir or rt.project, env=env, timeout_s=rt.local.timeouts.interactive
        )
    rel = rt.transcripts.rel(folder)
    outcome = session_outcome(
        name,
        session,
        request,
        rt.project,
        duration_s=session.duration_s,
        usage=Usage(agent=name),
        transcript=rel,
    )
    write_meta(folder, shown, session, outcome)
    rt._record(request, outcome, rel, session.duration_s, interactive=True)
    return outcome
