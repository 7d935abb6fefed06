"""Test helpers as a plain module (fixtures stay in `tests/conftest.py`): where the repository,
the conformance corpus and the test data are, the CLI in-process or as a subprocess, and small
builders for capability folders and projects. Import from here, never from conftest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
SHARED = REPO.parent / "shared"
CONFORMANCE = SHARED / "conformance"
GSD_CAPABILITIES = CONFORMANCE / "gsd-capabilities"
# Test data beside the test packages.
HOSTILE = TESTS / "hostile"
FAKES = TESTS / "fakes"
REFERENCE_DRIVER = TESTS / "reference_driver.cjs"

# A plain clone has no ../shared beside it: tests that read the corpus skip there.
needs_corpus = pytest.mark.skipif(
    not GSD_CAPABILITIES.is_dir(), reason="../shared/conformance is absent (a plain clone)"
)


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, input: str | None = None
):
    """Run `looprail ARGS…` in a real subprocess (the installed console entry point)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from looprail.cli import main; sys.exit(main())",
            *args,
        ],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=120,
    )


def feature(cap_id: str, **body: Any) -> dict[str, Any]:
    """A minimal valid feature manifest, with `body` merged in."""
    manifest: dict[str, Any] = {
        "id": cap_id,
        "role": "feature",
        "version": "1.0.0",
        "title": cap_id,
        "description": f"test capability {cap_id}",
        "tier": "full",
        "requires": [],
        "runtimeCompat": {"supported": ["*"], "unsupported": []},
    }
    manifest.update(body)
    return manifest


def write_capability(
    root: Path,
    manifest: dict[str, Any] | str | bytes,
    folder: str | None = None,
    files: dict[str, str] | None = None,
) -> Path:
    """Write `<root>/<id>/capability.json` (+ extra files) and return the folder."""
    name = folder or (manifest["id"] if isinstance(manifest, dict) else "cap")
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(manifest, dict):
        data = json.dumps(manifest, indent=2).encode()
    elif isinstance(manifest, str):
        data = manifest.encode()
    else:
        data = manifest
    (d / "capability.json").write_bytes(data)
    for rel, text in (files or {}).items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


def write_config(project: Path, config: Any) -> None:
    p = project / ".planning" / "config.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(config if isinstance(config, str) else json.dumps(config))


def write_exe(path: Path, body: str, shebang: str = "/bin/sh") -> Path:
    """Write an executable script `#!<shebang>` + `body` (folders made) and return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{shebang}\n{body}")
    path.chmod(0o755)
    return path
