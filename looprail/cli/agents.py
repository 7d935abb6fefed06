"""`looprail init` (scaffold a project that runs) and `looprail doctor` (is the agent ready?)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import sys
from dataclasses import replace
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace
from typing import NotRequired, TypedDict

from looprail.cli._common import command, print_json, project_folder, project_of
from looprail.cli.sources import gsd_sources, no_capabilities
from looprail.config import MAX_CONFIG_BYTES, load_project_config, load_project_config_strict
from looprail.errors import ConfigError, LooprailError, UsageError
from looprail.fsutil import atomic_write, create_new, read_bounded
from looprail.layout import (
    AGENTS_DIR,
    LOOPRAIL_DIR,
    PHASES_DIR,
    PLANNING_DIR,
    PROJECT_CONFIG_FILE,
    ROADMAP_FILE,
    ROLES_DIR,
    STATE_PATTERNS,
)
from looprail.machine.commits import git as commit_git
from looprail.machine.session.load import start_refusals
from looprail.plans.taskchecks import project_checks
from looprail.runtime.agents import ADAPTERS
from looprail.runtime.base import PHASE_ROLES
from looprail.runtime.git import git, is_git_repo
from looprail.runtime.interactive import shown_argv, terminal_problem
from looprail.runtime.local import missing_executable, resolve_host_tool
from looprail.runtime.models import role_model, role_models
from looprail.runtime.permits import permitted
from looprail.runtime.process import find_program, run_bounded
from looprail.runtime.registry import agent_name, available
from looprail.runtime.settings import looprail_settings
from looprail.textsafe import plural
from looprail.trust import load_compiled
from looprail.trust.agents import effective_agent

GITIGNORE = "# looprail state (journal, run lock, transcripts, plan worktrees)\n" + "".join(
    f"{LOOPRAIL_DIR}/{pattern}\n" for pattern in STATE_PATTERNS
)

ROADMAP = """\
# Roadmap

## Phase 1: {title}

{goal}
"""

ROLES = ("orchestrator", "planner", "executor", "verifier")
ROLE = PHASE_ROLES["discuss"]  # the role `run --interactive` hands the terminal to


def register(sub) -> None:
    p = sub.add_parser(
        "init",
        help="make a folder a looprail project, or adopt a GSD project: adds only what is missing",
        description="Make DIR (default: .) a looprail project, adding only what is missing and "
        "naming each thing added. A new folder gets .planning/config.json (with the agent), "
        "ROADMAP.md and a first phase folder; an existing GSD project keeps its own and gets "
        "only the `looprail` section of its config.json (nothing else in the file changes). "
        f"Both get the role briefs to edit ({LOOPRAIL_DIR}/roles/), .gitignore entries for "
        "looprail's run state, and, with the local runtime only, a starter executable for each "
        f"role ({LOOPRAIL_DIR}/agents/; an agent CLI needs none). Where there is no git "
        "repository, one is made, with a first commit of what init wrote. A file that exists "
        "is never changed (config.json only gains its `looprail` section); a second init adds "
        "nothing.",
    )
    p.add_argument(
        "dir",
        nargs="?",
        default=".",
        metavar="DIR",
        help="the project folder (default: here); created when absent",
    )
    p.add_argument(
        "--agent",
        metavar="NAME",
        help="the runtime that does the work: local, claude, codex, ... (default: the "
        "config's looprail.agent, else local); an agent the config already names is kept",
    )
    p.add_argument("--goal", default=None, metavar="TEXT", help="phase 1's goal in ROADMAP.md")
    p.set_defaults(handler=init)

    p = command(
        sub,
        "doctor",
        doctor,
        "check that the chosen agent CLI is installed and runs, and say how to fix it",
        "Check the runtime a run would use (--agent, else looprail.agent in "
        ".planning/config.json, else local): its CLI is on PATH and answers --version; git is "
        "there for plan worktrees. Exit 0 when ready, 1 with what to do otherwise.",
        positional=True,
        json="one line of JSON: agent, ready, checks",
    )
    p.add_argument("--agent", metavar="NAME", help="the runtime to check (default: the project's)")


def init(args) -> int:
    root = Path(args.dir)
    if root.exists() and not root.is_dir():
        raise LooprailError(f"{root}: exists and is not a folder")
    config = root / PROJECT_CONFIG_FILE
    has_section, agent = _chosen_agent(config, args.agent)
    phase = root / PHASES_DIR / "01-first"
    roadmap = root / ROADMAP_FILE
    # A new project gets a ROADMAP and a first phase; a GSD project keeps what it has.
    fresh = not (roadmap.exists() or (root / PHASES_DIR).exists())
    roles = root / LOOPRAIL_DIR / ROLES_DIR
    agents = root / LOOPRAIL_DIR / AGENTS_DIR
    ignore = root / ".gitignore"
    local = agent == "local"  # the local runtime runs executables: start with working ones
    # Nothing is written through a symlink: a cloned folder's `.planning`, `.looprail` (or a
    # folder in them) linked elsewhere, or a file there linked elsewhere (dangling or not), is
    # refused before anything is written, so init never creates or appends outside the project.
    folders = [root / PLANNING_DIR, root / LOOPRAIL_DIR, roles]
    folders += [root / PHASES_DIR, phase] if fresh else []
    folders += [agents] if local else []
    files_ = [config, ignore, *(roles / f"{role}.md" for role in ROLES)]
    files_ += [roadmap, phase / ".gitkeep"] if fresh else []
    files_ += [agents / role for role in ROLES] if local else []
    _refuse_links([*folders, *files_], ignore)
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    added: list[Path] = []
    said: dict[Path, str] = {}  # how an addition is named, where "added PATH" is not enough
    if not has_section:
        if _write_config(config, agent):
            said[config] = f"added the looprail section to {config} (agent: {agent})"
        added.append(config)
    added += _write_first_phase(phase, roadmap, args.goal) if fresh else []
    added += _write_roles(roles, agents if local else None)
    if _add_state_patterns(ignore):
        added.append(ignore)
    git_line = _first_commit(root, added)
    lines = [said.get(p, f"added {p}" + ("/" if p.is_dir() else "")) for p in added]
    _report(root, lines, git_line, fresh=fresh)
    return 0


def _write_first_phase(phase: Path, roadmap: Path, goal: str | None) -> list[Path]:
    """A new project's first phase folder and ROADMAP.md: what was written."""
    create_new(phase / ".gitkeep", "")
    goal = goal or "Describe what phase 1 delivers, in a few sentences."
    return [phase] + (
        [roadmap] if create_new(roadmap, ROADMAP.format(title="first", goal=goal)) else []
    )


def _chosen_agent(config: Path, given: str | None) -> tuple[bool, str]:
    """Whether the config has a `looprail` section (without one, init adds it) and the agent the
    project will use: the one the section names, else `--agent`, else local. An `--agent`
    other than the one the config names is refused (exit 1): init never changes a setting."""
    if given is not None and given not in available():
        raise UsageError(f"unknown agent {given!r}; choose one of: {', '.join(available())}")
    root = config.parent.parent
    if config.is_symlink() or (root / PLANNING_DIR).is_symlink():
        return False, given or "local"  # refused with the other links, before a read
    loaded = load_project_config_strict(root) if root.is_dir() else None
    if loaded is None or "looprail" not in loaded:
        return False, given or "local"
    named = agent_name(loaded)
    if given is not None and given != named:
        said = f"is {named!r}" if looprail_settings(loaded).agent else "is not set (local)"
        raise LooprailError(
            f"{config}: looprail.agent {said}; init never changes a setting, so --agent "
            f"{given} was not applied: set it in the file (nothing changed)"
        )
    return True, named


def _write_config(config: Path, agent: str) -> bool:
    """`config.json` with the `looprail` section added (created when absent: False): the
    file's own bytes are kept, the section inserted before its closing brace."""
    entry = {"agent": agent}
    raw = read_bounded(config, MAX_CONFIG_BYTES)
    if raw is None:
        create_new(config, json.dumps({"looprail": entry}, indent=2) + "\n")
        return False
    text = raw.decode("utf-8")
    updated = with_section(text, "looprail", entry)
    if updated is None:
        raise LooprailError(f"{config}: cannot add the looprail section here (nothing changed)")
    atomic_write(config, updated, mode=stat.S_IMODE(os.stat(config).st_mode))
    return True


def with_section(text: str, key: str, value: object) -> str | None:
    """`text`, a JSON object, with `"key": value` added as its last member and every other
    byte kept (its indentation followed); None when `text` is not a JSON object without
    `key`, or the result would not read back as that object plus the member."""
    try:
        before = json.loads(text)
    except ValueError:
        return None
    if not isinstance(before, dict) or key in before:
        return None
    body = text.rstrip()
    inner = body[:-1].rstrip()
    indent = re.search(r"\n([ \t]+)\"", inner)
    member = f"{indent.group(1) if indent else '  '}{json.dumps(key)}: {json.dumps(value)}"
    joined = f"{inner}\n{member}\n}}" if inner.endswith("{") else f"{inner},\n{member}\n}}"
    updated = joined + text[len(body) :]
    try:
        after = json.loads(updated)
    except ValueError:
        return None
    return updated if after == {**before, key: value} else None


def _first_commit(root: Path, added: list[Path]) -> str:
    """Where there is no git repository: make one, with a first commit of what init wrote
    (the user's own files are theirs to commit). What happened, or why not, in one line."""
    if find_program("git") is None:
        return "no git repository: git is not on PATH (plans of a wave will run one at a time)"
    if is_git_repo(root):
        return ""
    done = git(["init", "-q"], root)
    if done.exit_code != 0:
        return f"no git repository: git init failed ({_last_line(done)})"
    paths = [str(p.relative_to(root)) for p in added]
    if not paths:
        return f"initialised a git repository in {root} (init wrote nothing to commit)"
    staged = commit_git(["add", "--", *paths], root)
    if staged.exit_code == 0:
        staged = commit_git(["commit", "-q", "-m", "looprail init"], root)
    if staged.exit_code != 0:
        return f"initialised a git repository in {root}; no first commit ({_last_line(staged)})"
    return f"initialised a git repository in {root}, with a first commit of the files above"


def _last_line(done) -> str:
    said = (done.stderr or done.stdout).strip()
    return said.splitlines()[-1] if said else done.describe_failure()


def _report(root: Path, lines: list[str], git_line: str, *, fresh: bool) -> None:
    print("\n".join(lines) if lines else f"nothing to add: {root} has what looprail init adds")
    if git_line:
        print(git_line)
    where = f" (in {root})" if str(root) != "." else ""
    if fresh:
        roadmap = root / ROADMAP_FILE
        print(f"next: edit {roadmap}, then `looprail doctor` and `looprail run --phase 1`{where}")
    else:
        print(f"next: `looprail doctor`, `looprail lint`, then `looprail run --dry-run`{where}")


def _refuse_links(paths: list[Path], ignore: Path) -> None:
    for path in paths:
        if path.is_symlink():
            raise LooprailError(
                f"{path}: is a symlink; looprail init never writes through one (nothing changed)"
            )
    if ignore.exists() and not ignore.is_file():
        raise LooprailError(f"{ignore}: is not a regular file (nothing changed)")


def _write_roles(roles: Path, agents: Path | None) -> list[Path]:
    """The role briefs, and (`agents`: the local runtime) a starter executable for each role;
    the files written (existing ones are kept). The starter needs only the standard library,
    so its `#!/usr/bin/env python3` runs on any machine (a clone, a reinstall)."""
    written = []
    for role in ROLES:
        target = roles / f"{role}.md"
        if create_new(target, (files("looprail.runtime.roles") / f"{role}.md").read_text()):
            written.append(target)
    if agents is None:
        return written
    starter = (files("looprail.runtime.roles") / "local_agent.py").read_text()
    for role in ROLES:
        if create_new(agents / role, starter, mode=0o755):
            written.append(agents / role)
    return written


def _add_state_patterns(ignore) -> bool:
    """Append looprail's state patterns to `.gitignore` (created when absent) unless they are
    there; never through a symlink (`O_NOFOLLOW`: a link planted since the check is refused
    by the kernel, not followed). True when the file was written."""
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(ignore, flags, 0o644)
    with os.fdopen(fd, "r+b") as fh:
        have = fh.read().decode("utf-8", errors="replace")
        lines = [line.strip() for line in have.splitlines()]
        if any(line.strip("/") == LOOPRAIL_DIR for line in lines):
            return False  # the whole folder is ignored already
        missing = [line for line in GITIGNORE.splitlines()[1:] if line not in lines]
        if not missing:
            return False
        block = "".join(f"{line}\n" for line in [GITIGNORE.splitlines()[0], *missing])
        fh.write((("\n" if have and not have.endswith("\n") else "") + block).encode())
    return True


class Check(TypedDict):
    """One line of `looprail doctor`."""

    status: str  # ok | problem | warning
    message: str
    permissions: NotRequired[str]
    settings: NotRequired[str]
    models: NotRequired[dict[str, str]]  # role -> its model (and where it comes from)
    may_run: NotRequired[list[str]]  # what the executor may run without asking


def doctor(args) -> int:
    project = project_folder(project_of(args))
    config, _ = load_project_config(project)
    name = agent_name(config, args.agent)
    if name not in available():
        message = f"agent {name!r} is not a runtime here; choose one of: {', '.join(available())}"
        checks = [Check(status="problem", message=message)]
    else:
        # what `run` refuses to start on (the one rule doctor, lint and run share), then how
        # the runtime looks; nothing passes here that a run refuses
        refused = start_refusals(project, config, agent=args.agent)
        checks = [Check(status="problem", message=f"a run refuses: {r}") for r in refused]
        checks += [*_runtime_checks(project, config, name, bool(refused)), _git_check(project)]
        checks += [] if refused else _interactive_check(project, config, name)
        checks += _capability_checks(args, project)
    problems = sum(c["status"] == "problem" for c in checks)
    if args.json:
        print_json({"agent": name, "ready": not problems, "checks": checks})
        return 1 if problems else 0
    marks = {"ok": "✓", "problem": "✗", "warning": "!"}
    for c in checks:
        print(f"{marks[c['status']]} {c['message']}")
        if "permissions" in c:
            print(f"  {c['permissions']}")
        if "settings" in c:
            print(f"  settings: {c['settings']}")
        for role, model in c.get("models", {}).items():
            print(f"  {role}: {model}")
        for line in c.get("may_run", []):
            print(f"  {line}")
    if problems:
        print(plural(problems, "problem"), file=sys.stderr)
    return 1 if problems else 0


def _runtime_checks(project: Path, config, name: str, refused: bool) -> list[Check]:
    if name in ADAPTERS:
        return _adapter_checks(project, config, name, refused)
    if name != "local":
        return [Check(status="ok", message=f"{name}: a registered runtime (nothing to check)")]
    missing = [why for role in ROLES if (why := missing_executable(project, AGENTS_DIR, role))]
    if not missing:
        message = f"local: role executables under {LOOPRAIL_DIR}/{AGENTS_DIR}/"
        return [Check(status="ok", message=message)]
    fix = _agents_fix(config)
    return [Check(status="problem", message=f"local: {why} ({fix})") for why in missing]


def _agents_fix(config) -> str:
    """How to get the local runtime's role agents: only commands that then do it (`init`
    writes the starters when the project's agent is local, and takes `--agent` only while the
    config names none)."""
    try:
        named = looprail_settings(config).agent
    except ConfigError:
        named = "?"
    if named is None:
        return (
            "write it, or `looprail init` writes a starter for each role, or pick an agent "
            "CLI: `looprail init --agent claude`"
        )
    if named == "local":
        return "write it, or `looprail init` writes a starter for each role"
    return "write it"


def _adapter_checks(project: Path, config, name: str, refused: bool) -> list[Check]:
    """An agent CLI: its program found and answering --version (never a program the project
    supplies). Not found: said by the start refusal (`refused`) already."""
    adapter = ADAPTERS[name]()
    effective = effective_agent(project, config, name)  # what `run` would use
    checks: list[Check] = []
    binary = effective.settings.binary or adapter.binary
    found = find_program(binary)
    # Never run what the project supplies: a `binary` from its config (consented or not),
    # or a program found inside the project folder (e.g. through a relative PATH entry).
    supplied = PROJECT_CONFIG_FILE in effective.origin.get("binary", "") or (
        found is not None and Path(found).resolve().is_relative_to(Path(project).resolve())
    )
    if found is None:
        if not refused:  # (else the start refusal said it, with the same advice)
            message = f"{name}: `{binary}` not found on PATH; {adapter.install}"
            checks.append(Check(status="problem", message=message))
    elif supplied:
        where = effective.origin.get("binary") or "the project folder"
        message = (
            f"{name}: {os.path.abspath(found)} (from {where}): not run; doctor never runs "
            "a program the project supplies"
        )
        checks.append(Check(status="warning", message=message, permissions=effective.line()))
    else:
        checks += _version_checks(project, adapter, effective, name, found)
    if (sources := effective.sources()) and checks:
        checks[-1]["settings"] = sources
    return [*checks, _models_check(config, name, effective.settings), _may_run_check(project, name)]


def _may_run_check(project: Path, name: str) -> Check:
    """What the executor may run without asking: the tasks' check commands, as the CLI's
    allow-list names them (runtime/permits.py); a command that is not simple stays refused."""
    commands = list(dict.fromkeys(c.command for c in project_checks(project)))
    allowed, refused = permitted(commands)
    lines = ADAPTERS[name]().may_run(allowed) if commands else []
    lines += [f"not {c!r}: not one simple command (looprail runs it after)" for c in refused]
    said = f"{plural(len(commands), 'check command')} in the plans" if commands else "no checks"
    message = f"{name}: what the executor may run without asking ({said})"
    return Check(status="ok", message=message, may_run=lines)


def _models_check(config, name: str, settings) -> Check:
    """The model each role's call gets, and where it comes from (docs/agents.md, "Models")."""
    try:
        models = role_models(config, name, settings)
    except ConfigError as exc:
        return Check(status="problem", message=f"{name}: models: {exc}")
    shown = {m.role: f"{m.model} ({m.source})" if m.model else m.source for m in models.values()}
    return Check(status="ok", message=f"{name}: the model of each role", models=shown)


def _version_checks(project: Path, adapter, effective, name: str, found: str) -> list[Check]:
    done = run_bounded([found, "--version"], timeout_s=30)
    said = (done.stdout or done.stderr).strip()
    if done.spawn_error or done.timed_out:
        said = done.describe_failure()
    if not done.ok:
        last = said.splitlines()[-1] if said else "no output"
        message = f"{name}: `{found} --version` failed ({last}); {adapter.install}"
        return [Check(status="problem", message=message)]
    first = said.splitlines()[0] if said else "runs"
    message = f"{name}: {found} ({first})"
    checks = [Check(status="ok", message=message, permissions=effective.line())]
    ready = adapter.readiness(project, effective.settings, os.environ)
    return checks + [Check(status=status, message=line) for status, line in ready]


def _capability_checks(args, project: Path) -> list[Check]:
    """Which capabilities and host tool a run would use (`gsd_sources`), what else was found,
    and a warning when there would be none."""
    found = gsd_sources(args, project)
    count = len(load_compiled(project, args.capabilities).capabilities)
    if count:
        checks = [Check(status="ok", message=found.line())]
    else:
        checks = [Check(status="warning", message=no_capabilities(found))]
    tool = resolve_host_tool(found.host_tool) if found.host_tool is not None else None
    if isinstance(tool, str):
        checks.append(Check(status="problem", message=f"host tool: {tool}"))
    checks += [Check(status="warning", message=p) for p in found.problems if count]
    return checks + [Check(status="ok", message=note) for note in found.notes]


def _git_check(project: Path) -> Check:
    if find_program("git") is None:
        message = "git not found on PATH: plans of a wave will run one at a time (install git)"
        return Check(status="problem", message=message)
    if not is_git_repo(project):
        message = f"{project} is not a git repository: plans will run one at a time (git init)"
        return Check(status="warning", message=message)
    return Check(status="ok", message="git: parallel plans each get a worktree")


def _interactive_check(project, config, name: str) -> list[Check]:
    """What `run --interactive` would hand the terminal to, and whether a run here can (with
    `looprail.interactive` on, a run without a terminal refuses)."""
    if name in ADAPTERS:
        settings = effective_agent(project, config, name).settings
        with contextlib.suppress(ConfigError):  # a bad GSD model key: the models check says it
            settings = replace(settings, model=role_model(config, name, settings, ROLE).model)
        request = SimpleNamespace(kind="phase", name="discuss", verdict=None)
        argv = ADAPTERS[name]().interactive_argv("<prompt>", request, settings, git=True)  # type: ignore[arg-type]
        how = shown_argv(argv, "<prompt>")
    elif name == "local":
        how = f"{LOOPRAIL_DIR}/{AGENTS_DIR}/orchestrator, the request in $LOOPRAIL_REQUEST_FILE"
    else:
        return []
    try:
        on = looprail_settings(config).interactive
    except ConfigError as exc:
        return [Check(status="problem", message=str(exc))]
    if not on:
        message = f"interactive discuss (run --interactive): {how}, on your terminal"
        return [Check(status="ok", message=message)]
    problem = terminal_problem()
    if problem is not None:
        message = (
            f"looprail.interactive is on ({how}), and {problem}: a run from here refuses "
            "(exit 1) unless given --no-interactive"
        )
        return [Check(status="warning", message=message)]
    message = f"looprail.interactive is on: the discuss step talks with you here ({how})"
    return [Check(status="ok", message=message)]
