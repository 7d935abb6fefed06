"""Find GSD where it is installed (`RUNTIME_HOMES`, after the installer's `runtime-homes.cjs`),
read an install's capability registry with node into a cache folder, and decide what a command
uses (`sources`): docs/getting-started.md, "On an existing GSD project"."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from looprail.config import load_project_config
from looprail.errors import ConfigError
from looprail.fsutil import read_bounded
from looprail.layout import (
    CAPABILITIES_DIR,
    GSD_DIR,
    LOOPRAIL_DIR,
    PLANNING_DIR,
    PROJECT_CONFIG_FILE,
    cache_dir,
)
from looprail.runtime.process import find_program, run_bounded
from looprail.runtime.settings import looprail_settings_of

# The folder the installer copies GSD's core into (`get-shit-done` before GSD renamed it).
CORE_DIRS = ("gsd-core", "get-shit-done")
TOOL = os.path.join("bin", "gsd-tools.cjs")
REGISTRY = os.path.join("bin", "lib", "capability-registry.cjs")
MAX_REGISTRY_BYTES = 16 << 20
_READ_REGISTRY = "process.stdout.write(JSON.stringify(require(process.argv[1]).capabilities))"


@dataclass(frozen=True)
class RuntimeHome:
    """One runtime's config folder: the first set variable of `env` (a folder), of `file_env`
    (a file in it), `$XDG_CONFIG_HOME/<xdg>`, then each of `home` (under `$HOME`); `local` is
    the folder in a project (None: no local install)."""

    runtime: str
    env: tuple[str, ...]
    home: tuple[str, ...]
    local: str | None
    file_env: str | None = None
    xdg: str | None = None


RUNTIME_HOMES = (
    RuntimeHome("claude", ("CLAUDE_CONFIG_DIR",), (".claude",), ".claude"),
    RuntimeHome("codex", ("CODEX_HOME",), (".codex",), ".codex"),
    RuntimeHome(
        "opencode",
        ("OPENCODE_CONFIG_DIR",),
        (".config/opencode",),
        ".opencode",
        "OPENCODE_CONFIG",
        "opencode",
    ),
    RuntimeHome("kilo", ("KILO_CONFIG_DIR",), (".config/kilo",), ".kilo", "KILO_CONFIG", "kilo"),
    RuntimeHome(
        "antigravity",
        ("ANTIGRAVITY_CONFIG_DIR",),
        (".gemini/antigravity", ".gemini/antigravity-ide", ".gemini/antigravity-cli"),
        ".agents",
    ),
    RuntimeHome("gemini", ("GEMINI_CONFIG_DIR",), (".gemini",), ".gemini"),  # sunset in GSD
    RuntimeHome("copilot", ("COPILOT_CONFIG_DIR", "COPILOT_HOME"), (".copilot",), ".github"),
    RuntimeHome("cursor", ("CURSOR_CONFIG_DIR",), (".cursor",), ".cursor"),
    RuntimeHome("windsurf", ("WINDSURF_CONFIG_DIR",), (".codeium/windsurf",), ".windsurf"),
    RuntimeHome("augment", ("AUGMENT_CONFIG_DIR",), (".augment",), ".augment"),
    RuntimeHome("trae", ("TRAE_CONFIG_DIR",), (".trae",), ".trae"),
    RuntimeHome("qwen", ("QWEN_CONFIG_DIR",), (".qwen",), ".qwen"),
    RuntimeHome("hermes", ("HERMES_HOME",), (".hermes",), ".hermes"),
    RuntimeHome("cline", ("CLINE_CONFIG_DIR",), (".cline",), "."),  # local: <project>/gsd-core
    RuntimeHome("codebuddy", ("CODEBUDDY_CONFIG_DIR",), (".codebuddy",), ".codebuddy"),
    RuntimeHome("zcode", ("ZCODE_CONFIG_DIR",), (".zcode",), ".zcode"),
    RuntimeHome("pi", ("PI_CODING_AGENT_DIR",), (".pi/agent",), ".pi"),
    RuntimeHome("kimi", ("KIMI_CONFIG_DIR",), (".config/agents", ".agents"), None),
    RuntimeHome("kimi-code", ("KIMI_CODE_HOME",), (".kimi-code",), ".kimi-code"),
)


@dataclass(frozen=True)
class GsdInstall:
    """One install of GSD's core: `root` is its `gsd-core` folder."""

    runtime: str  # the runtime it was installed for ("" when named by a path)
    scope: str  # "global", "local" (inside the project) or "named"
    root: Path
    version: str | None

    @property
    def tool(self) -> Path:
        return self.root / TOOL

    @property
    def registry(self) -> Path:
        return self.root / REGISTRY

    def label(self) -> str:
        """`GSD 1.10.0 (claude, global) at ~/.claude/gsd-core`."""
        what = ", ".join(w for w in (self.runtime, self.scope) if w)
        return f"GSD {self.version or '(version unknown)'} ({what}) at {_shown(self.root)}"


def _candidates(home: RuntimeHome, env: Mapping[str, str]) -> list[str]:
    user = env.get("HOME") or os.path.expanduser("~")
    out = [_expand(env[v], user) for v in home.env if env.get(v, "").strip()]
    if home.file_env and env.get(home.file_env, "").strip():
        out.append(os.path.dirname(_expand(env[home.file_env], user)))
    if home.xdg and env.get("XDG_CONFIG_HOME", "").strip():
        out.append(os.path.join(env["XDG_CONFIG_HOME"], home.xdg))
    return out + [os.path.join(user, rel) for rel in home.home]


def _expand(path: str, user: str) -> str:
    return user + path[1:] if path == "~" or path.startswith("~/") else path


def install_at(
    folder: str | os.PathLike[str], runtime: str = "", scope: str = "named"
) -> GsdInstall | None:
    """The install whose `gsd-core` is `folder` or a folder in it, or None."""
    base = Path(folder)
    for root in (base, *(base / name for name in CORE_DIRS)):
        if (root / TOOL).is_file():
            return GsdInstall(runtime, scope, root.absolute(), _version(root))
    return None


def _version(root: Path) -> str | None:
    try:
        raw = read_bounded(root / "VERSION", 4096)
    except OSError:
        return None
    text = raw.decode("utf-8", "replace").strip() if raw else ""
    return text.splitlines()[0][:40] if text else None


def find_installs(
    project: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> tuple[GsdInstall, ...]:
    """Every install the installer could have made: global ones in `RUNTIME_HOMES` order,
    then the project's local ones; one entry per folder."""
    env = os.environ if env is None else env
    found: dict[str, GsdInstall] = {}
    for home in RUNTIME_HOMES:
        for folder in _candidates(home, env):
            _add(found, install_at(folder, home.runtime, "global"))
    if project is not None:
        for home in RUNTIME_HOMES:
            if home.local is not None:
                _add(found, install_at(Path(project, home.local), home.runtime, "local"))
    return tuple(found.values())


def _add(found: dict[str, GsdInstall], install: GsdInstall | None) -> None:
    if install is not None:
        found.setdefault(os.path.realpath(install.root), install)


@dataclass(frozen=True)
class Sources:
    """What a command uses, where the capabilities came from (`where`), what was found and not
    used (`notes`), and what could not be read (`problems`)."""

    capabilities: tuple[str, ...]
    host_tool: str | None
    flavor: str
    where: str
    installs: tuple[GsdInstall, ...] = ()
    used: GsdInstall | None = None
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def line(self) -> str:
        """The one line `lint`, `doctor` and `run` say it in."""
        tool = _shown(self.host_tool) if self.host_tool else "none"
        return f"capabilities: {self.where}; host tool: {tool}"


def sources(
    project: str | os.PathLike[str],
    *,
    capabilities: Sequence[str] = (),
    host_tool: str | None = None,
    flavor: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Sources:
    """What a command on `project` uses: its flags, else `.planning/config.json`, else (a GSD
    project, `LOOPRAIL_CAPABILITIES` unset) a global install, `looprail.agent`'s first. A named
    folder that is an install has its registry read. `ConfigError` for an unusable value."""
    env = os.environ if env is None else env
    root = Path(project).resolve()
    config = load_project_config(root)[0]
    # only the keys read here validated: a bad value of another is for its reader to say
    settings = looprail_settings_of(config, ("capabilities", "host_tool", "flavor"))
    notes: list[str] = []
    problems: list[str] = []
    used: list[GsdInstall] = []
    installs: tuple[GsdInstall, ...] = ()
    if capabilities:
        folders = _named(list(capabilities), used, problems, env)
        where = "--capabilities " + ", ".join(capabilities) + _labels(used)
    elif env.get("LOOPRAIL_CAPABILITIES"):
        folders, where = [], "LOOPRAIL_CAPABILITIES"
    elif settings.capabilities is not None:
        named = [_config_folder(root, entry) for entry in settings.capabilities]
        folders = _named(named, used, problems, env)
        where = f"{PROJECT_CONFIG_FILE} (looprail.capabilities)" + _labels(used)
    elif (root / PLANNING_DIR).is_dir():
        installs = find_installs(root, env)
        folders, where = _found(installs, _agent(config), used, (notes, problems), env)
    else:
        folders, where = [], "none named"
    if host_tool is None and settings.host_tool is not None:
        host_tool = _config_tool(root, settings.host_tool)
    if host_tool is None and used:
        host_tool = str(used[0].tool)
    flavor = flavor or settings.flavor or "gsd"
    first = used[0] if used else None
    return Sources(
        tuple(folders), host_tool, flavor, where, installs, first, tuple(notes), tuple(problems)
    )


def _labels(installs: list[GsdInstall]) -> str:
    return f": {'; '.join(i.label() for i in installs)}" if installs else ""


def _agent(config: Any) -> str | None:
    """`looprail.agent` when it is a name (its reader says when it is not)."""
    try:
        return looprail_settings_of(config, ("agent",)).agent
    except ConfigError:
        return None


def _named(
    entries: list[str], used: list[GsdInstall], problems: list[str], env: Mapping[str, str]
) -> list[str]:
    """Each folder as it is, an install's as the folder of its registry's capabilities."""
    out = []
    for entry in entries:
        install = install_at(entry)
        if install is None:
            out.append(entry)
            continue
        folder = registry_folder(install, env)
        if isinstance(folder, str):
            problems.append(folder)
            continue
        used.append(install)
        out.append(str(folder))
    return out


def _found(
    installs: tuple[GsdInstall, ...],
    agent: str | None,
    used: list[GsdInstall],
    said: tuple[list[str], list[str]],
    env: Mapping[str, str],
) -> tuple[list[str], str]:
    """The first global install (the agent's own first) that reads; the others noted, and why
    one could not be read."""
    notes, problems = said
    for install in installs:
        if install.scope == "local":
            notes.append(
                f"{install.label()}: not read on its own (it came with the project, and "
                f"reading its registry runs its code); to use it: --capabilities {install.root}"
            )
    ranked = sorted((i for i in installs if i.scope == "global"), key=lambda i: i.runtime != agent)
    for install in ranked:
        folder = registry_folder(install, env)
        if isinstance(folder, str):
            problems.append(folder)
            continue
        used.append(install)
        notes += [f"{i.label()}: also installed, not used" for i in ranked if i is not install]
        count = sum((p / "capability.json").is_file() for p in folder.iterdir())
        return [str(folder)], f"{install.label()}, {count} capabilities"
    return [], "no GSD install found" if not ranked else "no GSD install could be read"


def _config_folder(root: Path, entry: str) -> str:
    """A `looprail.capabilities` entry as a path (relative to the project). One inside the
    project is refused: it came with `git clone`, and a project's capabilities need consent."""
    path = root / _expand(entry, os.path.expanduser("~"))  # an absolute entry stays as it is
    if Path(os.path.realpath(path)).is_relative_to(root):
        raise ConfigError(
            PROJECT_CONFIG_FILE,
            f"looprail.capabilities: {entry!r} is inside the project; a project's own "
            f"capabilities go in {LOOPRAIL_DIR}/{CAPABILITIES_DIR} or {GSD_DIR}/"
            f"{CAPABILITIES_DIR}, where `looprail trust` reviews them",
            field="looprail.capabilities",
        )
    return str(path)


def _config_tool(root: Path, value: str) -> str:
    """`looprail.host_tool`: a plain name stays one; a path is relative to the project."""
    if "/" not in value and value != "~":
        return value
    path = Path(_expand(value, os.path.expanduser("~")))
    return str(path if path.is_absolute() else root / path)


def registry_folder(install: GsdInstall, env: Mapping[str, str] | None = None) -> Path | str:
    """A folder of the install's first-party capabilities, or why there is none. Written once
    per registry content into looprail's cache: node runs only when the registry changed."""
    try:
        raw = read_bounded(install.registry, MAX_REGISTRY_BYTES)
    except OSError as exc:
        return f"{_shown(install.registry)}: cannot read ({exc.strerror or exc})"
    if raw is None:
        return f"{_shown(install.root)}: no {REGISTRY} (a GSD without a capability registry)"
    target = Path(cache_dir(env), "gsd-registry", hashlib.sha256(raw).hexdigest()[:24])
    if target.is_dir():
        return target
    manifests = read_registry(install.registry)
    if isinstance(manifests, str):
        return manifests
    return _write_folders(target, manifests)


def read_registry(registry: Path) -> dict[str, Any] | str:
    """The registry's manifests by id, as node reads the module, or why not."""
    node = find_program("node")
    if node is None:
        return f"node not found on PATH: cannot read {_shown(registry)}"
    done = run_bounded(
        [node, "-e", _READ_REGISTRY, str(registry)],
        timeout_s=60,
        output_cap=4 * MAX_REGISTRY_BYTES,
        guard=False,
    )
    if not done.ok or done.truncated:
        last = (done.stderr.strip().splitlines() or [done.describe_failure()])[-1]
        return f"{_shown(registry)}: node could not read it ({last})"
    try:
        data = json.loads(done.stdout)
    except ValueError as exc:
        return f"{_shown(registry)}: not JSON from node ({exc})"
    if not isinstance(data, dict):
        return f"{_shown(registry)}: its capabilities are not an object"
    return data


def _write_folders(target: Path, manifests: Mapping[str, Any]) -> Path:
    """Each manifest as `<id>/capability.json`, an inlined fragment back in the file its `path`
    names, then renamed into place at once."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".tmp-{os.getpid()}-{target.name}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for cid, manifest in manifests.items():
        if not isinstance(manifest, dict) or not _plain_name(cid):
            continue  # not a folder name: such an id never loads anyway
        folder = tmp / cid
        folder.mkdir()
        for group in ("steps", "contributions"):
            for entry in manifest.get(group) or ():
                _unline_fragment(folder, entry)
        text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
        (folder / "capability.json").write_text(text, encoding="utf-8")
    try:
        tmp.rename(target)
    except OSError:  # another looprail wrote it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _unline_fragment(folder: Path, entry: Any) -> None:
    frag = entry.get("fragment") if isinstance(entry, dict) else None
    if not isinstance(frag, dict):
        return
    path, text = frag.get("path"), frag.get("inline")
    if not (isinstance(path, str) and isinstance(text, str)):
        return
    dest = os.path.normpath(os.path.join(folder, path))
    if os.path.commonpath([dest, str(folder)]) != str(folder) or dest == str(folder):
        return  # kept as the registry has it: the manifest's validation names the path
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    Path(dest).write_text(text, encoding="utf-8")
    del frag["inline"]


def _plain_name(name: object) -> bool:
    return (
        isinstance(name, str)
        and bool(name)
        and not name.startswith(".")
        and os.sep not in name
        and "/" not in name
        and "\0" not in name
    )


def _shown(path: str | os.PathLike[str]) -> str:
    """`path` with the home folder as `~`."""
    text, home = os.fspath(path), os.path.expanduser("~")
    return "~" + text[len(home) :] if home != "/" and text.startswith(home + os.sep) else text
