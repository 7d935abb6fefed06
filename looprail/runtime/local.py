"""The default runtime: executables under `<project>/.looprail/`, each unit of work one bounded
process (the request JSON on stdin, `LOOPRAIL_*` in the environment; exit 0 ok, 69 could not
look, else failed: docs/runtime.md). Names come from manifests, which may be third-party: a
name is a plain file name, and what it resolves to must stay inside `.looprail/`."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from looprail.layout import AGENTS_DIR, CHECKS_DIR, COMMANDS_DIR, LOOPRAIL_DIR, SKILLS_DIR
from looprail.runtime.base import (
    EXIT_UNAVAILABLE,
    SESSION_NAME,
    TASK_ROLE,
    BaseRuntime,
    DispatchContext,
    Liveness,
    Outcome,
    OutcomeFields,
    Request,
    RunStart,
    RuntimeInfo,
    phase_req_ids,
    require_verdict,
)
from looprail.runtime.hostcall import argument_values, query_args
from looprail.runtime.interactive import (
    NOT_CAPTURED,
    handover_line,
    run_on_terminal,
    session_outcome,
    terminal_problem,
)
from looprail.runtime.logs import OutputTee, Transcripts
from looprail.runtime.process import (
    DEFAULT_OUTPUT_CAP,
    ProcessResult,
    escape_untrusted,
    exit_words,
    find_program,
    run_bounded,
)
from looprail.runtime.settings import Timeouts as Timeouts  # re-exported: the runtime's defaults

# A plain file name: no path separator, no leading "-" (option) or "." (hidden, "..").
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._:+@-]*\Z")


def _stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class LocalRuntime(BaseRuntime):
    """With `host_tool` (e.g. `gsd_run`), commands and query checks go to that tool instead:
    `<tool> <words> --phase <N> --raw` and `<tool> check <words> <N> --raw`."""

    name = "local"

    def __init__(
        self,
        project: str | Path,
        *,
        host_tool: str | None = None,
        timeouts: Timeouts | None = None,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        progress: Callable[[str], None] | None = None,
        env: Mapping[str, str] | None = None,
        output: Callable[[str, str, str], None] | None = None,
    ) -> None:
        if output_cap <= 0:
            raise ValueError(f"output_cap must be positive, got {output_cap}")
        super().__init__(progress=progress or _stderr_progress, output=output)
        self.project = Path(project).resolve()
        self.root = self.project / LOOPRAIL_DIR
        self.host_tool = host_tool
        self.timeouts = timeouts or Timeouts()
        self.output_cap = output_cap
        self.env = dict(env or {})
        # Set by `begin_run`: a run files every process's output under .looprail/logs/<run>/;
        # outside a run (lint probes, `check`) nothing is written.
        self.transcripts: Transcripts | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> LocalRuntime:
        return cls(
            settings.project,
            host_tool=settings.host_tool,
            timeouts=settings.timeouts,
            progress=settings.progress,
            env=settings.env,
            output=getattr(settings, "output", None),
        )

    def begin_run(self, run: RunStart) -> None:
        if self.transcripts is None:
            self.transcripts = Transcripts(self.project)
        self.transcripts.run_id = run.run_id

    def __repr__(self) -> str:
        return f"LocalRuntime({str(self.project)!r}, host_tool={self.host_tool!r})"

    def describe(self) -> RuntimeInfo:
        return RuntimeInfo(name=self.name, host_tool=self.host_tool)

    def handle(self, request: Request, ctx: DispatchContext) -> Outcome:
        request, ctx = self.own(request, ctx)
        kind = request.kind
        if kind == "context":  # the machine keeps the fragments; role work gets them
            return Outcome.succeeded()
        if kind == "skill":
            return self._run_executable(SKILLS_DIR, request.name, [], request, ctx)
        if kind in ("agent", "verdict"):
            return self._run_executable(AGENTS_DIR, request.name, [], request, ctx, banner=True)
        if kind == "phase" and ctx.terminal:  # `run --interactive`: the role gets the terminal
            role = request.role or TASK_ROLE
            found = locate(self.root, AGENTS_DIR, role)
            if isinstance(found, str):
                return Outcome.failed(found)
            label = f"{LOOPRAIL_DIR}/{AGENTS_DIR}/{role}"
            return local_session(self, found, label, request, ctx)
        if kind in ("phase", "task"):
            role = request.role or TASK_ROLE
            return self._run_executable(AGENTS_DIR, role, [], request, ctx, banner=True)
        if kind in ("message", "compact"):
            return self._run_executable(None, SESSION_NAME, [], request, ctx)
        return self._host_or_words(request, ctx)

    def _host_or_words(self, request: Request, ctx: DispatchContext) -> Outcome:
        """A command, query check or host call: through the host tool, else `.looprail/`."""
        kind, words = request.kind, request.words or ()
        host = ctx.host_tool or self.host_tool
        if kind == "host":  # `check predicate --predicate JSON ...`: words of the host's own
            if not host:
                return Outcome.failed("no host tool is configured")
            return self._run_host_tool(host, words, f"{host} {request.name}", request, ctx)
        refused = _refuse_words(words)
        if refused:
            return Outcome.failed(f"refused {kind} {' '.join(words)!r}: {refused}")
        if kind == "command":
            tail = ["--phase", ctx.phase_number, "--raw"]
            if host:
                label = f"{host} {' '.join(words)}"
                return self._run_host_tool(host, [*words, *tail], label, request, ctx)
            return self._run_executable(COMMANDS_DIR, words[0], [*words[1:], *tail], request, ctx)
        if kind == "query":
            # the values the host's workflow passes at `ctx.point` (`hostcall.QUERY_ARGS`)
            names = query_args(ctx.point)
            req_ids = phase_req_ids(self, ctx) if "phase_req_ids" in names else ""
            values = argument_values(names, self.project, ctx.phase_number, ctx.phase_dir, req_ids)
            if host:
                argv = ["check", *words, *values, "--raw"]
                label = f"{host} check {' '.join(words)}"
                return self._run_host_tool(host, argv, label, request, ctx)
            return self._run_executable(CHECKS_DIR, words[0], [*words[1:], *values], request, ctx)
        raise ValueError(f"unknown request kind {kind!r}")  # pragma: no cover - Literal

    def own(self, request: Request, ctx: DispatchContext) -> tuple[Request, DispatchContext]:
        """`request` and `ctx` with the project spelled as this runtime's absolute path."""
        if ctx.project == self.project:
            return request, ctx
        if Path(ctx.project).resolve() != self.project:
            raise ValueError(f"context is for project {ctx.project}, runtime for {self.project}")
        request = request.model_copy(update={"project": str(self.project)})
        return request, ctx.model_copy(update={"project": self.project})

    def _run_executable(
        self,
        folder: str | None,
        name: str,
        args: Sequence[str],
        request: Request,
        ctx: DispatchContext,
        *,
        banner: bool = False,
    ) -> Outcome:
        found = locate(self.root, folder, name)
        if isinstance(found, str):
            return Outcome.failed(found)
        label = f"{LOOPRAIL_DIR}/{folder}/{name}" if folder else f"{LOOPRAIL_DIR}/{name}"
        liveness = self.announce(request) if banner else None
        try:
            argv = [str(found), *args]
            return self._spawn(argv, label, request, ctx, send_request=True, liveness=liveness)
        finally:
            if liveness is not None:
                liveness.close()

    def _run_host_tool(
        self, host: str, args: Sequence[str], label: str, request: Request, ctx: DispatchContext
    ) -> Outcome:
        env = self._environment(request, ctx)
        tool = resolve_host_tool(host, env.get("PATH"))
        if not isinstance(tool, Path):
            return Outcome.failed(tool)
        # A host tool has its own stdin conventions; it gets the request only via LOOPRAIL_*.
        return self._spawn([str(tool), *args], label, request, ctx, send_request=False, env=env)

    def _spawn(
        self,
        argv: Sequence[str],
        label: str,
        request: Request,
        ctx: DispatchContext,
        *,
        send_request: bool,
        env: Mapping[str, str] | None = None,
        liveness: Liveness | None = None,
    ) -> Outcome:
        # a call of the host tool is bounded as a query check is
        bound = "query" if request.kind == "host" else request.kind
        timeout_s = ctx.timeout_s or self.timeouts.for_kind(bound)
        log = self._log_file(request)
        tee = OutputTee(
            combined=log,
            on_line=self.line_sink(request, liveness=liveness),
            header=f"# looprail: {label} {' '.join(argv[1:])}".rstrip() if log else None,
        )
        try:
            result = run_bounded(
                argv,
                timeout_s=timeout_s,
                stdin=request.to_json() if send_request else None,
                cwd=ctx.workdir or self.project,
                env=env if env is not None else self._environment(request, ctx),
                output_cap=self.output_cap,
                on_output=tee if tee.wanted else None,
            )
        except BaseException:
            tee.close("# looprail: stopped (looprail was interrupted)")
            raise
        outcome = outcome_of(result, label, timeout_s)
        end = "ok" if outcome.ok else outcome.detail
        tee.close(f"# looprail: {end} ({result.duration_s:.1f}s)" if log else None)
        if log is not None and self.transcripts is not None:
            rel = self.transcripts.rel(log)
            update: dict[str, object] = {"transcript": rel}
            if not outcome.ok:
                update["detail"] = f"{outcome.detail} (log: {rel})"
            outcome = outcome.model_copy(update=update)
        # A check that exited 0 must have printed a verdict (named as what ran).
        return require_verdict(outcome, label) if request.kind in ("query", "verdict") else outcome

    def _log_file(self, request: Request) -> Path | None:
        if self.transcripts is None:
            return None
        try:
            return self.transcripts.file(request)
        except OSError:  # no room for logs: the work still runs
            return None

    def _environment(self, request: Request, ctx: DispatchContext) -> dict[str, str]:
        return {
            **os.environ,
            **self.env,
            **ctx.env,
            # Ours always set, possibly empty: a nested run must never inherit a stale value.
            "LOOPRAIL_PROJECT": str(self.project),
            "LOOPRAIL_PHASE": ctx.phase_number,
            "LOOPRAIL_PHASE_DIR": str(ctx.phase_dir) if ctx.phase_dir else "",
            "LOOPRAIL_POINT": ctx.point or "",
            "LOOPRAIL_KIND": request.kind,
            "LOOPRAIL_NAME": request.name,
            "LOOPRAIL_CAP_ID": ctx.cap_id or "",
            "LOOPRAIL_FLAVOR": ctx.flavor,
            "LOOPRAIL_PLAN_ID": request.plan_id or "",
            "LOOPRAIL_TASK_ID": request.task_id or "",
            "LOOPRAIL_WAVE": "" if request.wave is None else str(request.wave),
            "LOOPRAIL_WORKDIR": str(ctx.workdir or self.project),
        }


def locate(root: Path, folder: str | None, name: str) -> Path | str:
    """The executable `<root>/<folder>/<name>` (`root` a `.looprail/`), or why there is none."""
    where = f"{LOOPRAIL_DIR}/{folder}/" if folder else f"{LOOPRAIL_DIR}/"
    label = f"{where}{name}"
    if not _PLAIN_NAME.match(name) or ".." in name:
        return (
            f"refused name {escape_untrusted(name)!r} under {where}: "
            'not a plain file name (no "/", "..", or leading "-" or ".")'
        )
    path = root / folder / name if folder else root / name
    if not os.path.lexists(path):
        return f"no executable {label}"
    real = path.resolve()
    if not real.is_relative_to(root.resolve()):
        return f"{label} resolves outside {LOOPRAIL_DIR}/ (to {real}); refused"
    if not real.exists():
        return f"no executable {label} (dangling symlink)"
    if not real.is_file():
        return f"{label} is not a file"
    if not os.access(real, os.X_OK):
        return f"{label} is not executable (chmod +x {label})"
    return real


def missing_executable(project: Path, folder: str | None, name: str) -> str | None:
    """Why the local runtime could not run `.looprail/<folder>/<name>`, or None."""
    found = locate(Path(project).resolve() / LOOPRAIL_DIR, folder, name)
    return found if isinstance(found, str) else None


def resolve_host_tool(host: str, path: str | None = None) -> Path | str:
    """The executable a `--host-tool` names (a plain name on `path`, default `$PATH`, or an
    absolute path; anything else is refused), or why there is none."""
    shown = escape_untrusted(host)
    if os.path.isabs(host):
        if "\0" in host:
            return f"refused host tool {shown!r}: contains a NUL byte"
        candidate = Path(host)
        if not candidate.is_file():
            return f"host tool {shown} does not exist or is not a file"
        if not os.access(candidate, os.X_OK):
            return f"host tool {shown} is not executable"
        return candidate
    if not _PLAIN_NAME.match(host) or ".." in host:
        return (
            f"refused host tool {shown!r}: give a plain name to look up on PATH or an absolute path"
        )
    # Only absolute PATH entries: an empty or relative one means the current directory, which
    # is often the project itself (a planted `gsd_run`).
    found = find_program(host, {"PATH": path if path is not None else os.environ.get("PATH", "")})
    if found is None:
        return f"host tool {shown} not found on PATH"
    # A relative PATH entry is relative to looprail's cwd, but the tool runs in the project.
    return Path(os.path.abspath(found))


def outcome_of(result: ProcessResult, label: str, timeout_s: float) -> Outcome:
    common: OutcomeFields = {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "duration_s": result.duration_s,
        "truncated": result.truncated,
    }
    if result.spawn_error:
        return Outcome.failed(f"could not start {label}: {result.spawn_error}", **common)
    if result.timed_out:
        return Outcome.failed(
            f"{label} timed out after {timeout_s:g}s and was killed", timed_out=True, **common
        )
    code = result.exit_code
    if code == 0:
        return Outcome.succeeded(**common)
    why = exit_words(code, "unavailable: could not look" if code == EXIT_UNAVAILABLE else None)
    last = last_line(result.stderr)
    return Outcome.failed(f"{label} {why}{': ' + last if last else ''}", exit_code=code, **common)


def _refuse_words(words: Sequence[str]) -> str | None:
    """Defence in depth behind the manifest grammar: no option-looking, empty or spaced word."""
    for word in words:
        if not word or word.startswith("-") or any(ch.isspace() or ord(ch) < 0x20 for ch in word):
            return f"word {escape_untrusted(word)!r} is not a plain word"
    return None


def last_line(text: str, limit: int = 300) -> str:
    """The last non-blank line of `text`, escaped and cut."""
    for line in reversed(text.splitlines()):
        if line.strip():
            line = escape_untrusted(line.strip())
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def local_session(
    rt: LocalRuntime, executable: Path, label: str, request: Request, ctx: DispatchContext
) -> Outcome:
    """One phase step with `.looprail/agents/<role>` on the terminal: its stdin is the user's,
    so the request is in the file `$LOOPRAIL_REQUEST_FILE` (and `LOOPRAIL_INTERACTIVE=1`)."""
    problem = terminal_problem()
    if problem is not None:
        return Outcome.failed(f"{label}: an interactive session needs a terminal: {problem}")
    log = rt._log_file(request)
    if rt.progress is not None:
        rt.progress(handover_line(label, label, request, rt.project))
    with tempfile.TemporaryDirectory(prefix="looprail-request-") as tmp:
        path = Path(tmp) / "request.json"
        path.write_text(request.to_json(), encoding="utf-8")
        env = rt._environment(request, ctx)
        env.update({"LOOPRAIL_REQUEST_FILE": str(path), "LOOPRAIL_INTERACTIVE": "1"})
        session = run_on_terminal(
            [str(executable)],
            cwd=ctx.workdir or rt.project,
            env=env,
            timeout_s=rt.timeouts.interactive,
        )
    common: OutcomeFields = {"duration_s": session.duration_s}
    if log is not None and rt.transcripts is not None:
        with contextlib.suppress(OSError):
            log.write_text(
                f"# looprail: {label} (transcript {NOT_CAPTURED})\n"
                f"# looprail: the session {session.how()} ({session.duration_s:.1f}s)\n",
                encoding="utf-8",
            )
            common["transcript"] = rt.transcripts.rel(log)
    return session_outcome(label, session, request, rt.project, **common)
