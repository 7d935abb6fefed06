"""`looprail init` (scaffold a project that runs) and `looprail doctor` (is the agent ready?)."""

from __future__ import annotations

import json
import os
import sys
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace
from typing import NotRequired, TypedDict

from looprail.cli._common import command, print_json, project_folder, project_of
from looprail.config import load_project_config
from looprail.errors import ConfigError, LooprailError, UsageError
from looprail.fsutil import create_new
from looprail.layout import (
    AGENTS_DIR,
    LOGS_DIR,
    LOOPRAIL_DIR,
    PHASES_DIR,
    PLANNING_DIR,
    PROJECT_CONFIG_FILE,
    ROADMAP_FILE,
    ROLES_DIR,
    STATE_PATTERNS,
)
from looprail.runtime.agents import ADAPTERS
from looprail.runtime.git import git, git_program, is_git_repo
from looprail.runtime.interactive import shown_argv, terminal_problem
from looprail.runtime.process import find_program, run_bounded
from looprail.runtime.registry import RuntimeSettings, agent_name, available, create_runtime
from looprail.settings import looprail_settings
from looprail.textsafe import plural
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


def register(sub) -> None:
    p = sub.add_parser(
        "init",
        help="scaffold a project that runs (config, roadmap, first phase, role briefs, git)",
        description="Create DIR (default: .) as a looprail project: .planning/config.json with "
        f"the chosen agent, ROADMAP.md, a first phase folder, {LOOPRAIL_DIR}/roles/ with the role "
        "briefs to edit, a .gitignore for looprail's state, and a git repository. Existing "
        "files are never overwritten.",
    )
    p.add_argument(
        "dir",
        nargs="?",
        default=".",
        metavar="DIR",
        help="the project folder to create (default: here)",
    )
    p.add_argument("--agent", default="local", metavar="NAME", help="runtime (default: local)")
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
    if args.agent not in available():
        raise UsageError(f"unknown agent {args.agent!r}; choose one of: {', '.join(available())}")
    root = Path(args.dir)
    if root.exists() and not root.is_dir():
        raise LooprailError(f"{root}: exists and is not a folder")
    config = root / PROJECT_CONFIG_FILE
    if config.exists():
        raise LooprailError(f"{config}: already a looprail project (nothing changed)")
    phase = root / PHASES_DIR / "01-first"
    roadmap = root / ROADMAP_FILE
    roles = root / LOOPRAIL_DIR / ROLES_DIR
    agents = root / LOOPRAIL_DIR / AGENTS_DIR
    ignore = root / ".gitignore"
    local = args.agent == "local"  # the local runtime runs executables: start with working ones
    # Nothing is written through a symlink: a cloned folder's `.planning`, `.looprail` (or a
    # folder in them) linked elsewhere, or a file there linked elsewhere (dangling or not), is
    # refused before anything is written, so init never creates or appends outside the project.
    folders = [root / PLANNING_DIR, root / PHASES_DIR, phase, root / LOOPRAIL_DIR]
    folders += [roles] + ([agents] if local else [])
    files_ = [config, roadmap, phase / ".gitkeep", ignore]
    files_ += [roles / f"{role}.md" for role in ROLES]
    files_ += [agents / role for role in ROLES] if local else []
    _refuse_links([*folders, *files_], ignore)
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    create_new(phase / ".gitkeep", "")
    if not create_new(config, json.dumps({"looprail": {"agent": args.agent}}, indent=2) + "\n"):
        raise LooprailError(f"{config}: already a looprail project (nothing changed)")
    written = [config, phase]
    goal = args.goal or "Describe what phase 1 delivers, in a few sentences."
    if create_new(roadmap, ROADMAP.format(title="first", goal=goal)):
        written.append(roadmap)
    written += _write_roles(roles, agents if local else None)
    if _add_state_patterns(ignore):
        written.append(ignore)
    if git_program() and not is_git_repo(root):
        done = git(["init", "-q"], root)
        if done.exit_code == 0:
            print(f"initialised a git repository in {root}")
    for path in written:
        print(f"wrote {path}")
    print(
        f"next: edit {roadmap}, then `looprail doctor` and `looprail run --phase 1`"
        + (f" (in {root})" if str(root) != "." else "")
    )
    return 0


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
    the files written (existing ones are kept)."""
    written = []
    for role in ROLES:
        target = roles / f"{role}.md"
        if create_new(target, (files("looprail.runtime.roles") / f"{role}.md").read_text()):
            written.append(target)
    if agents is None:
        return written
    # the interpreter running looprail, which has what the starter imports
    starter = (files("looprail.runtime.roles") / "local_agent.py").read_text()
    text = starter.replace("#!/usr/bin/env python3", f"#!{sys.executable}", 1)
    for role in ROLES:
        if create_new(agents / role, text, mode=0o755):
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
        if f"{LOOPRAIL_DIR}/{LOGS_DIR}/" in have:
            return False
        fh.write((("\n" if have and not have.endswith("\n") else "") + GITIGNORE).encode())
    return True


class Check(TypedDict):
    """One line of `looprail doctor`."""

    status: str  # ok | problem | warning
    message: str
    permissions: NotRequired[str]
    settings: NotRequired[str]


def doctor(args) -> int:
    project = project_folder(project_of(args))
    config, _ = load_project_config(project)
    name = agent_name(config, args.agent)
    if name not in available():
        choose = f"choose one of: {', '.join(available())}"
        checks = [
            Check(status="problem", message=f"agent {name!r} is not a runtime here; {choose}")
        ]
    else:
        checks = [*_runtime_checks(project, config, name), _git_check(project)]
        talk = _interactive_check(project, config, name)
        if talk is not None:
            checks.append(Check(status=talk[0], message=talk[1]))
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
    if problems:
        print(plural(problems, "problem"), file=sys.stderr)
    return 1 if problems else 0


def _runtime_checks(project: Path, config, name: str) -> list[Check]:
    if name in ADAPTERS:
        return _adapter_checks(project, config, name)
    if name != "local":
        return [Check(status="ok", message=f"{name}: a registered runtime (nothing to check)")]
    runtime = create_runtime(name, RuntimeSettings(project=project))
    missing = [why for role in ROLES if (why := runtime.missing(AGENTS_DIR, role))]
    if not missing:
        return [
            Check(
                status="ok", message=f"local: role executables under {LOOPRAIL_DIR}/{AGENTS_DIR}/"
            )
        ]
    fix = "write it, or pick an agent: looprail init --agent claude"
    return [Check(status="problem", message=f"local: {why} ({fix})") for why in missing]


def _adapter_checks(project: Path, config, name: str) -> list[Check]:
    """An agent CLI: what a run would refuse, and its program found and answering --version
    (never a program the project supplies)."""
    adapter = ADAPTERS[name]()
    effective = effective_agent(project, config, name)  # what `run` would use
    checks: list[Check] = []
    refusal = effective.refusal()
    if refusal is not None:
        checks.append(Check(status="problem", message=f"{name}: a run refuses: {refusal}"))
    binary = effective.settings.binary or adapter.binary
    found = find_program(binary)
    # Never run what the project supplies: a `binary` from its config (consented or not),
    # or a program found inside the project folder (e.g. through a relative PATH entry).
    supplied = PROJECT_CONFIG_FILE in effective.origin.get("binary", "") or (
        found is not None and Path(found).resolve().is_relative_to(Path(project).resolve())
    )
    if found is None:
        checks.append(
            Check(
                status="problem", message=f"{name}: `{binary}` not found on PATH; {adapter.install}"
            )
        )
    elif supplied:
        where = effective.origin.get("binary") or "the project folder"
        message = (
            f"{name}: {os.path.abspath(found)} (from {where}): not run; doctor never runs "
            "a program the project supplies"
        )
        checks.append(Check(status="warning", message=message, permissions=effective.line()))
    else:
        checks += _version_checks(project, adapter, effective, name, found)
    if sources := effective.sources():
        checks[-1]["settings"] = sources
    return checks


def _version_checks(project: Path, adapter, effective, name: str, found: str) -> list[Check]:
    done = run_bounded([found, *adapter.version_args], timeout_s=30)
    said = (done.stdout or done.stderr).strip()
    if done.spawn_error or done.timed_out:
        said = done.describe_failure()
    if not done.ok:
        last = said.splitlines()[-1] if said else "no output"
        message = f"{name}: `{found} --version` failed ({last}); {adapter.install}"
        return [Check(status="problem", message=message)]
    first = said.splitlines()[0] if said else "runs"
    checks = [
        Check(status="ok", message=f"{name}: {found} ({first})", permissions=effective.line())
    ]
    for status, line in adapter.readiness(project, effective.settings, os.environ):
        checks.append(Check(status=status, message=line))
    return checks


def _git_check(project: Path) -> Check:
    if git_program() is None:
        message = "git not found on PATH: plans of a wave will run one at a time (install git)"
        return Check(status="problem", message=message)
    if not is_git_repo(project):
        message = f"{project} is not a git repository: plans will run one at a time (git init)"
        return Check(status="warning", message=message)
    return Check(status="ok", message="git: parallel plans each get a worktree")


def _interactive_check(project, config, name: str) -> tuple[str, str] | None:
    """What `run --interactive` would hand the terminal to, and whether a run here can (with
    `looprail.interactive` on, a run without a terminal refuses)."""
    if name in ADAPTERS:
        settings = effective_agent(project, config, name).settings
        request = SimpleNamespace(kind="phase", name="discuss", verdict=None)
        argv = ADAPTERS[name]().interactive_argv("<prompt>", request, settings, git=True)  # type: ignore[arg-type]
        how = shown_argv(argv, "<prompt>")
    elif name == "local":
        how = f"{LOOPRAIL_DIR}/{AGENTS_DIR}/orchestrator, the request in $LOOPRAIL_REQUEST_FILE"
    else:
        return None
    try:
        on = looprail_settings(config).interactive
    except ConfigError as exc:
        return "problem", str(exc)
    if not on:
        return "ok", f"interactive discuss (run --interactive): {how}, on your terminal"
    problem = terminal_problem()
    if problem is not None:
        return (
            "warning",
            f"looprail.interactive is on ({how}), and {problem}: a run from here refuses "
            "(exit 1) unless given --no-interactive",
        )
    return "ok", f"looprail.interactive is on: the discuss step talks with you here ({how})"
