"""Test helpers as a plain module (fixtures stay in `tests/conftest.py`): where the repository,
the conformance corpus and the test data are, the CLI in-process or as a subprocess, and small
builders for capability folders and projects. Import from here, never from conftest."""

from __future__ import annotations

import io
import json
import os
import subprocess as subprocess_
import sys
import traceback
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
# The bundled example project and its capabilities.
EXAMPLE = REPO / "examples" / "hello-loop"
EXAMPLE_CAPS = REPO / "examples" / "capabilities"

# A plain clone has no ../shared beside it: tests that read the corpus skip there.
needs_corpus = pytest.mark.skipif(
    not GSD_CAPABILITIES.is_dir(), reason="../shared/conformance is absent (a plain clone)"
)


# How hard the property tests try. Every explicit example count goes through `examples(n)`:
# n in the everyday run (the README's `python -m pytest`), ten times n with
# LOOPRAIL_HYPOTHESIS=thorough. tests/conftest.py loads the matching hypothesis profile for the
# properties that name no count.
HYPOTHESIS_PROFILES = {"default": 1, "thorough": 10}
HYPOTHESIS_PROFILE = os.environ.get("LOOPRAIL_HYPOTHESIS", "").strip() or "default"
if HYPOTHESIS_PROFILE not in HYPOTHESIS_PROFILES:
    raise pytest.UsageError(
        f"LOOPRAIL_HYPOTHESIS={HYPOTHESIS_PROFILE!r}: expected one of {sorted(HYPOTHESIS_PROFILES)}"
    )


def examples(n: int) -> int:
    """A property's example count `n`, scaled by the LOOPRAIL_HYPOTHESIS profile."""
    return n * HYPOTHESIS_PROFILES[HYPOTHESIS_PROFILE]


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str | None] | None = None,
    input: str | None = None,
    subprocess: bool = False,
) -> subprocess_.CompletedProcess[str]:
    """Run `looprail ARGS…` and return what `subprocess.run(…, capture_output=True, text=True)`
    would: `.returncode`, `.stdout`, `.stderr`. `env` is laid over this process's environment
    (a value of None removes that variable).

    In process by default (`looprail.cli.main`, the same code the console script runs, without
    an interpreter start per call); `subprocess=True` runs a real process instead, for tests
    where the process boundary is the thing tested (start-up imports, exit codes of a real
    process, the installed entry point)."""
    if subprocess:
        return run_cli_process(*args, cwd=cwd, env=env, input=input)
    return run_cli_in_process(*args, cwd=cwd, env=env, input=input)


def run_cli_process(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str | None] | None = None,
    input: str | None = None,
) -> subprocess_.CompletedProcess[str]:
    """Run `looprail ARGS…` in a real subprocess (what the console entry point runs)."""
    full_env = _with(dict(os.environ), env)
    return subprocess_.run(
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


def _with(environ: Any, env: dict[str, str | None] | None) -> Any:
    for key, value in (env or {}).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    return environ


def _stream(data: bytes = b"", errors: str = "strict") -> io.TextIOWrapper:
    # Like a pipe: not a terminal, UTF-8, with a `.buffer` for the commands that write bytes.
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors=errors, newline="")


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer.getvalue()  # type: ignore[attr-defined]
    # `text=True` reads with universal newlines; do the same.
    return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def run_cli_in_process(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str | None] | None = None,
    input: str | None = None,
) -> subprocess_.CompletedProcess[str]:
    """`looprail.cli.main(ARGS)` in this process, with its own cwd, environment, stdin, stdout
    and stderr for the call (all restored after). An uncaught exception becomes what the
    interpreter would print: a traceback on stderr and exit code 1."""
    from looprail.cli import main

    stdin = _stream((input or "").encode())
    # Python's own stdout is strict and its stderr backslash-escapes what it cannot encode.
    stdout, stderr = _stream(), _stream(errors="backslashreplace")
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    try:
        _with(os.environ, env)
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            code = 1
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess_.CompletedProcess(["looprail", *args], code, _text(stdout), _text(stderr))


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


def cli_commands(parser: Any = None, path: tuple[str, ...] = ()) -> Any:
    """Every parser of the CLI as `(path, parser)`, the top one first (`()`), then each command
    and subcommand (`("capability", "list")`): what tests walk to check every command."""
    import argparse

    if parser is None:
        from looprail.cli.app import build_parser

        parser = build_parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from cli_commands(child, (*path, name))


def cli_leaf_commands() -> Any:
    """`(name, parser)` of every command that has no subcommands (`"capability list"`)."""
    import argparse

    for path, parser in cli_commands():
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
            yield " ".join(path), parser
