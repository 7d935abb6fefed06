"""The layout facts every layer shares: looprail's folders and the well-known files in them,
where phases live, how phase numbers are normalised (`01` and `1` are one phase) and ordered,
how plan files are named and paired with SUMMARYs.
Every module asks here rather than spelling a path out, so no two can disagree."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Literal, get_args

# The folder looprail keeps in a project and, by default, in the user's home.
LOOPRAIL_DIR = ".looprail"
# Well-known names inside either folder.
CAPABILITIES_DIR = "capabilities"  # overlay capabilities (global or project)
HOOKS_FILE = "hooks.json"  # native hooks (global or project)
CONSENT_FILE = "consent.json"  # the consent store (home only)
USER_AGENTS_FILE = "agents.json"  # the user's own agent settings (home only)
JOURNAL_KEY_FILE = "journal.key"  # the key that seals journals (home only)
JOURNAL_FILE = "journal.sqlite"  # the run journal (project only)
LOCK_FILE = "run.lock"  # one run per project (project only)
NEXT_TURN_FILE = "next-turn.json"  # queued native-hook context (project only)
PARTIAL_DIR = "partial"  # work set aside on resume (project only)
LOGS_DIR = "logs"  # logs/<run>/: every step, check and agent's output (project only)
WORKTREES_DIR = "worktrees"  # one git worktree per plan (project only)
CACHE_DIR = "cache"  # (project only)
# The local runtime's executables and role prompts (project only).
AGENTS_DIR = "agents"
SKILLS_DIR = "skills"
COMMANDS_DIR = "commands"
CHECKS_DIR = "checks"
ROLES_DIR = "roles"
# Every folder looprail keeps in a project's `.looprail/`: `looprail run` refuses to start when
# one is a symlink out of the project (`fsutil.check_looprail_folders`).
LOOPRAIL_FOLDERS = (
    LOGS_DIR,
    WORKTREES_DIR,
    PARTIAL_DIR,
    CACHE_DIR,
    CAPABILITIES_DIR,
    ROLES_DIR,
    AGENTS_DIR,
    SKILLS_DIR,
    COMMANDS_DIR,
    CHECKS_DIR,
)
# looprail's run state inside the project folder, as .gitignore patterns relative to it: it
# never belongs in a commit (`looprail init` writes them to .gitignore, every run to
# .git/info/exclude).
STATE_PATTERNS = (
    f"{JOURNAL_FILE}*",
    LOCK_FILE,
    NEXT_TURN_FILE,
    f"{LOGS_DIR}/",
    f"{WORKTREES_DIR}/",
    f"{PARTIAL_DIR}/",
    f"{CACHE_DIR}/",
)

# The host project's planning folder and the files looprail reads in it.
PLANNING_DIR = ".planning"
PHASES_DIR = os.path.join(PLANNING_DIR, "phases")
ROADMAP_FILE = os.path.join(PLANNING_DIR, "ROADMAP.md")
PROJECT_CONFIG_FILE = os.path.join(PLANNING_DIR, "config.json")
STATE_FILE = os.path.join(PLANNING_DIR, "STATE.md")  # GSD's tracking files (looprail/tracking.py)
REQUIREMENTS_FILE = os.path.join(PLANNING_DIR, "REQUIREMENTS.md")

# GSD's own folder, in the user's home (`$GSD_HOME`, else `$HOME`) and in a project: its
# third-party capabilities live in `<it>/.gsd/capabilities/<id>/` (the reference's
# capability-loader), which looprail searches beside its own overlays.
GSD_DIR = ".gsd"
# The host flavors: skill-id prefix, host tool name, onError vocabulary (`--flavor`,
# `looprail.flavor`).
Flavor = Literal["gsd", "msd", "ferrox"]
FLAVORS: tuple[Flavor, ...] = get_args(Flavor)
# The project's documents a planner, verifier or discuss agent is pointed to (it reads them).
PROJECT_DOCS = tuple(
    os.path.join(PLANNING_DIR, name) for name in ("REQUIREMENTS.md", "PROJECT.md", "STATE.md")
)
# A phase folder's documents those agents are pointed to, by the suffix of their name.
PHASE_DOCS = ("RESEARCH.md", "PATTERNS.md", "UI-SPEC.md")


def looprail_home(env: Mapping[str, str] | None = None) -> str:
    """looprail's per-user folder: `$LOOPRAIL_HOME` (a leading `~` expanded against the same
    environment's `HOME`), else `$HOME/.looprail`."""
    env = os.environ if env is None else env
    user_home = env.get("HOME") or os.path.expanduser("~")
    configured = env.get("LOOPRAIL_HOME")
    if not configured:
        return os.path.join(user_home, LOOPRAIL_DIR)
    if configured == "~" or configured.startswith("~" + os.sep):
        return user_home + configured[1:]
    return os.path.expanduser(configured)  # `~user/...`, or nothing to expand


def gsd_overlays(
    project: str | os.PathLike[str], env: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """GSD's capability overlays: (`$GSD_HOME/.gsd/capabilities`, else under `$HOME`; the
    project's `.gsd/capabilities`)."""
    env = os.environ if env is None else env
    home = env.get("GSD_HOME") or env.get("HOME") or os.path.expanduser("~")
    return (
        os.path.join(home, GSD_DIR, CAPABILITIES_DIR),
        os.path.join(os.fspath(project), GSD_DIR, CAPABILITIES_DIR),
    )


def cache_dir(env: Mapping[str, str] | None = None) -> str:
    """looprail's cache folder (only speed lives here; deleting it is always safe):
    `$LOOPRAIL_CACHE_DIR`, else `$XDG_CACHE_HOME/looprail`, else `$HOME/.cache/looprail`."""
    env = os.environ if env is None else env
    if env.get("LOOPRAIL_CACHE_DIR"):
        return env["LOOPRAIL_CACHE_DIR"]
    base = env.get("XDG_CACHE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    return os.path.join(base, "looprail")


def config_path(project: str | os.PathLike[str]) -> str:
    """The project's `.planning/config.json`."""
    return os.path.join(os.fspath(project), PROJECT_CONFIG_FILE)


def project_path(project: str | os.PathLike[str], *parts: str) -> str:
    """A path inside the project's looprail folder, `<project>/.looprail`."""
    return os.path.join(os.fspath(project), LOOPRAIL_DIR, *parts)


PHASE_DIR_RE = r"(?P<token>\d+[A-Za-z]?(?:\.\d+)*)(?:-(?P<slug>.*))?"


def normalize_phase_number(token: str) -> str | None:
    """`01` → `1`, `02.1` → `2.1`, `12a` → `12A`; None when `token` is not a phase number."""
    match = re.fullmatch(r"(\d+)([A-Za-z]?)((?:\.\d+)*)", token.strip())
    if match is None:
        return None
    main, letter, decimals = match.groups()
    rest = "".join(f".{_number(part)}" for part in decimals.split(".")[1:])
    return f"{_number(main)}{letter.upper()}{rest}"


def _number(digits: str) -> str:
    """A run of digits without its leading zeros: through `int()` (any script's digits read
    as numbers) up to 100 digits; past that, as text (`int()` refuses over 4,300 digits), so
    a number of any length normalises and never raises."""
    return str(int(digits)) if len(digits) <= 100 else digits.lstrip("0") or "0"


def phase_sort_key(number: str) -> tuple[tuple[int, str], str, tuple[tuple[int, str], ...]]:
    """The order of normalised phase numbers: `2` < `2.1` < `2.10` < `10` < `12` < `12A`.
    Digits compare as numbers by (length, text): they have no leading zeros, and no `int()`
    is needed whatever their length."""
    match = re.fullmatch(r"(\d+)([A-Z]?)((?:\.\d+)*)", number)
    assert match is not None  # numbers come from normalize_phase_number
    main, letter, decimals = match.groups()
    parts = tuple((len(p), p) for p in decimals.split(".")[1:])
    return (len(main), main), letter, parts


def scan_phase_dirs(project: str | os.PathLike[str]) -> list[tuple[str, str, str, str]]:
    """(number, token, slug, path) of every phase folder under `.planning/phases/`, in phase
    order (then by name)."""
    root = os.path.join(os.fspath(project), PHASES_DIR)
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    found = []
    for entry in entries:
        match = re.fullmatch(PHASE_DIR_RE, entry.name)
        if match is None or not entry.is_dir():
            continue
        number = normalize_phase_number(match.group("token"))
        assert number is not None
        found.append((number, match.group("token"), match.group("slug") or "", entry.path))
    return sorted(found, key=lambda f: (phase_sort_key(f[0]), os.path.basename(f[3])))


def phase_artifact(names: list[str], suffix: str) -> str | None:
    """Which of a phase folder's file `names` is its `suffix` artifact (`CONTEXT.md`…): the
    suffix itself, else the first name ending with it."""
    if suffix in names:
        return suffix
    return next((n for n in names if n.endswith(suffix)), None)


def plan_id_from_filename(name: str) -> str | None:
    """`01-02-PLAN.md` → `01-02`, a bare `PLAN.md` → `PLAN` (the reference's id for it is
    the empty string); None for anything else."""
    if name == "PLAN.md":
        return "PLAN"
    match = re.fullmatch(r"(.+)-PLAN\.md", name)
    return match.group(1) if match else None


@lru_cache(maxsize=8192)
def canonical_plan_id(token: str) -> str:
    """The comparison key of a plan id: zero padding and case do not make a different id
    (`01-02` == `1-2`, `02.1-01` == `2.1-1`)."""
    parts = re.split(r"([.-])", token.strip().lower())
    return "".join(_number(p) if p.isdecimal() else p for p in parts)


# A plan id that names its phase: `<phase>-<plan>` (`28-01`, `2.1-03-slug`).
PLAN_ID_RE = r"(?P<phase>\d+[A-Za-z]?(?:\.\d+)*)-(?P<plan>.+)"
_REF_TOKEN = r"(?:\d{2,}[A-Z]?|\d[A-Z])(?:\.\d+)*"
_REF_PLAN_TOKEN = r"(?:\d{2}(?!\d)[A-Z]?|\d[A-Z])(?:\.\d+)*"


@lru_cache(maxsize=8192)
def reference_canonical_id(plan_id: str) -> str:
    """The reference's `extractCanonicalPlanId`: the first `<phase>-<NN>` pair of an id
    (`15-01-error-handling` → `15-01`), else the id itself."""
    parts = [p for p in plan_id.split("-") if p]
    for i, part in enumerate(parts):
        if re.fullmatch(_REF_TOKEN, part, re.I):
            if i + 1 < len(parts) and re.fullmatch(_REF_PLAN_TOKEN, parts[i + 1], re.I):
                return f"{part}-{parts[i + 1]}"
            break
    return plan_id


class Summaries:
    """A folder's file names with its SUMMARY files indexed by canonical plan id, built once per
    listing, so pairing every plan of a phase is linear, not quadratic."""

    __slots__ = ("by_id", "present")

    def __init__(self, names: list[str]):
        self.present = set(names)
        self.by_id: dict[str, tuple[int, str]] = {}  # canonical id -> (position, name): first
        for at, name in enumerate(names):
            if name.endswith("-SUMMARY.md"):
                self.by_id.setdefault(canonical_plan_id(name[: -len("-SUMMARY.md")]), (at, name))


def summary_of(
    plan_file: str, names: list[str] | Summaries, phase: str
) -> tuple[str | None, str | None]:
    """The SUMMARY file of a plan file among a phase folder's file `names`, and a note when only
    looprail pairs them: the reference's candidates first (`PLAN`→`SUMMARY`, `<stem>-SUMMARY.md`,
    `<phase>-<NN>-SUMMARY.md`), then zero padding ignored and a short `01-PLAN.md` paired with
    `28-01-SUMMARY.md`. Pass `Summaries(names)` when pairing many plans of one listing."""
    index = names if isinstance(names, Summaries) else Summaries(names)
    candidates, keys = _summary_keys(plan_file, phase)
    for candidate in candidates:
        if candidate in index.present:
            return candidate, None
    found = [index.by_id[key] for key in keys if key in index.by_id]
    if found:
        name = min(found)[1]
        return name, f"{name} is read as this plan's SUMMARY; the reference does not pair them"
    return None, None


def summary_file(plan_file: str) -> str:
    """The SUMMARY file looprail writes when a plan is done: the first name `summary_of` pairs
    with it (`01-02-PLAN.md` → `01-02-SUMMARY.md`, a bare `PLAN.md` → `SUMMARY.md`)."""
    return re.sub("PLAN", "SUMMARY", plan_file.removesuffix(".md"), count=1, flags=re.I) + ".md"


@lru_cache(maxsize=8192)
def _summary_keys(plan_file: str, phase: str) -> tuple[tuple[str, ...], frozenset[str]]:
    """The SUMMARY names the reference pairs with `plan_file`, in its order, and the canonical
    ids looprail also accepts (a pure function of the two names: a run asks after every wave)."""
    base = plan_file.removesuffix(".md")
    candidates = [summary_file(plan_file)]
    candidates.append(base + "-SUMMARY.md")
    extended = re.match(r"(\d+)-PLAN-(\d+)", base, re.I)
    if extended:
        candidates.append(f"{extended[1]}-{extended[2]}-SUMMARY.md")
    stem = re.sub(r"-PLAN$", "", base, flags=re.I)
    canonical = reference_canonical_id(stem)
    if canonical != stem:
        candidates.append(canonical + "-SUMMARY.md")
    plan_id = plan_id_from_filename(plan_file) or stem
    keys = {canonical_plan_id(plan_id), canonical_plan_id(reference_canonical_id(plan_id))}
    if re.fullmatch(PLAN_ID_RE, plan_id) is None:
        keys.add(f"{canonical_plan_id(phase)}-{canonical_plan_id(plan_id)}")
    return tuple(candidates), frozenset(keys)


def phase_folders(project: str, phase: str) -> list[str]:
    """Names of the folders under `.planning/phases/` that hold phase `phase`, sorted."""
    wanted = normalize_phase_number(phase)
    root = os.path.join(project, PHASES_DIR)
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for name in names:
        match = re.fullmatch(PHASE_DIR_RE, name)
        same = match and normalize_phase_number(match.group("token")) == wanted
        if same and os.path.isdir(os.path.join(root, name)):
            out.append(name)
    return out


_LOG_IN_REASON = r"\((?:log|transcript): ([^\s()]+)\)"


def log_of(reason: str | None) -> str | None:
    """The log a failure line points to (`… (log: …)`, `(transcript: …)`), or None."""
    if not reason:
        return None
    found = re.findall(_LOG_IN_REASON, reason)
    return found[-1] if found else None
