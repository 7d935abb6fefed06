"""The command that adds an optional extra (`ui`, `dask`) to this looprail as it was installed
(pipx, `uv tool`, a git URL or wheel: PEP 610 `direct_url.json`), not just `pip install`."""

from __future__ import annotations

import json
import shlex
import sys
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "looprail"


def install_command(extra: str, *, prefix: str | None = None) -> str:
    """The shell-quoted command; `prefix` is the environment (default: this interpreter's)."""
    env = Path(prefix or sys.prefix)
    origin = _direct_url()
    if (env / "pipx_metadata.json").is_file():
        return f"pipx install --force {shlex.quote(_requirement(extra, origin))}"
    if (env / "uv-receipt.toml").is_file():
        return f"uv tool install {shlex.quote(_requirement(extra, origin))}"
    python = shlex.quote(sys.executable)
    uv = _installer() == "uv"  # a virtual environment uv made has no pip of its own
    pip = f"uv pip install --python {python}" if uv else f"{python} -m pip install"
    folder = _editable_folder(origin)
    if folder is not None:  # a clone installed with -e: keep it editable
        return f"{pip} -e {shlex.quote(f'{folder}[{extra}]')}"
    return f"{pip} {shlex.quote(_requirement(extra, origin))}"


def _requirement(extra: str, origin: dict | None) -> str:
    """`looprail[extra]`, pinned to where this looprail came from when it was not an index."""
    name = f"{DISTRIBUTION}[{extra}]"
    if not origin or not isinstance(origin.get("url"), str):
        return name
    url = origin["url"]
    vcs = origin.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("vcs"), str):
        commit = vcs.get("commit_id")
        return f"{name} @ {vcs['vcs']}+{url}" + (f"@{commit}" if commit else "")
    return f"{name} @ {url}"


def _editable_folder(origin: dict | None) -> str | None:
    if not origin or not (origin.get("dir_info") or {}).get("editable"):
        return None
    parsed = urlparse(str(origin.get("url", "")))
    return unquote(parsed.path) if parsed.scheme == "file" else None


def _direct_url() -> dict | None:
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        data = json.loads(text) if text else None
    except (metadata.PackageNotFoundError, ValueError, OSError):
        return None
    return data if isinstance(data, dict) else None


def _installer() -> str:
    try:
        return (metadata.distribution(DISTRIBUTION).read_text("INSTALLER") or "").strip()
    except (metadata.PackageNotFoundError, OSError):
        return ""
