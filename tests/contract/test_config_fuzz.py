"""Seeded differential fuzzer (issue 11, item 7): random `.planning/config.json` files over every
key the 44 first-party manifests read, compared byte for byte with the reference.

For each seed: one project with a generated config (every JSON value type, enum values and
non-values, flat dotted keys, non-object parents, missing keys, and now and then a malformed,
duplicate-key or non-object file). At all 12 points, `looprail loop render-hooks POINT --raw`
must print exactly the reference's bytes, and `--active-cap ID` must answer as the reference
for every capability id (each checked against the reference's envelope through the function
the flag calls, and a sample of ids through both CLIs' own `--active-cap`). The reference runs in one node process per batch
(`tests/reference_driver.cjs`); looprail runs in-process through `looprail.cli.main`.

Needs LOOPRAIL_REFERENCE (the reference's gsd-tools.cjs), node and ../shared; skips otherwise.
LOOPRAIL_FUZZ_SEEDS sets the number of seeds (default 20), LOOPRAIL_FUZZ_FIRST the first one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from looprail.points import POINTS
from tests.support import GSD_CAPABILITIES, REFERENCE_DRIVER

REFERENCE = os.environ.get("LOOPRAIL_REFERENCE", "")
pytestmark = [
    pytest.mark.skipif(not REFERENCE, reason="LOOPRAIL_REFERENCE is not set"),
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(not GSD_CAPABILITIES.is_dir(), reason="../shared is absent"),
]
DRIVER = REFERENCE_DRIVER
SEEDS = int(os.environ.get("LOOPRAIL_FUZZ_SEEDS", "20"))
FIRST = int(os.environ.get("LOOPRAIL_FUZZ_FIRST", "0"))


def _corpus() -> tuple[dict[str, dict[str, Any]], set[str], dict[str, set[str]]]:
    """(declared config keys → spec, every key read, capability ids with hooks per point)."""
    declared: dict[str, dict[str, Any]] = {}
    read: set[str] = set()
    by_point: dict[str, set[str]] = {p: set() for p in POINTS}
    for path in sorted(GSD_CAPABILITIES.glob("*/capability.json")):
        m = json.loads(path.read_text())
        declared.update(m.get("config") or {})
        if m.get("activationKey"):
            read.add(m["activationKey"])
        for group in ("steps", "contributions", "gates"):
            for h in m.get(group) or ():
                by_point.setdefault(h["point"], set()).add(m["id"])
                if h.get("when"):
                    read.add(h["when"])
                read.update((h.get("configValues") or {}).values())
    return declared, read | set(declared), by_point


# Raw JSON snippets: text, not Python values, so 1e400 and 2**53 + 1 reach both parsers as written.
SCALARS = [
    "true", "false", "0", "1", "-0", "0.0", "2", "2.5", "-1", "1e400", "-1e400", "1e-400",
    "9007199254740993", "1e21", "null", '""', '"true"', '"false"', '"x"', '"0"', '"HIGH"',
    "[]", "[false]", "{}", '{"enabled": true}', '"\\u00e9"',
]  # fmt: skip


def _value(rng: random.Random, spec: dict[str, Any] | None) -> str:
    if spec and spec.get("type") == "enum" and rng.random() < 0.4:
        return json.dumps(rng.choice(spec["values"]))
    if spec and spec.get("type") == "boolean" and rng.random() < 0.4:
        return rng.choice(["true", "false"])
    return rng.choice(SCALARS)


def _emit(node: dict[str, Any]) -> str:
    """JSON text of a tree whose leaves are raw snippets (a list of pairs keeps duplicates)."""
    parts = []
    for key, value in node["pairs"]:
        text = value if isinstance(value, str) else _emit(value)
        parts.append(f"{json.dumps(key)}: {text}")
    return "{" + ", ".join(parts) + "}"


def generate(seed: int, declared: dict[str, dict[str, Any]], keys: set[str]) -> str | None:
    """The config.json text for one seed (None: no file)."""
    rng = random.Random(seed)
    roll = rng.random()
    if roll < 0.03:
        return None
    root: dict[str, Any] = {"pairs": []}

    def child(node: dict[str, Any], key: str) -> dict[str, Any]:
        for k, v in node["pairs"]:
            if k == key and isinstance(v, dict):
                return v
        new: dict[str, Any] = {"pairs": []}
        node["pairs"].append((key, new))
        return new

    for key in sorted(keys):
        r = rng.random()
        if r < 0.35:
            continue  # missing
        if r < 0.42:
            root["pairs"].append((key, _value(rng, declared.get(key))))  # a flat dotted key
            continue
        *parents, leaf = key.split(".")
        node = root
        for p in parents:
            node = child(node, p)
        node["pairs"].append((leaf, _value(rng, declared.get(key))))
        if rng.random() < 0.05:  # a duplicate key: the last one wins
            node["pairs"].append((leaf, _value(rng, declared.get(key))))
    for _ in range(rng.randrange(3)):  # noise the reference and looprail both ignore
        root["pairs"].append((rng.choice(["mode", "zzz", "granularity", "model_profile"]),
                              rng.choice(SCALARS)))  # fmt: skip
    if rng.random() < 0.05:  # a parent that is not an object
        top = rng.choice(["workflow", "mempalace", "review", "intel"])
        root["pairs"].append((top, rng.choice(["1", '"x"', "[]", "null", "true"])))
    text = _emit(root)
    if roll < 0.06:
        return text[:-1] + ",}"  # malformed: a trailing comma
    if roll < 0.09:
        return rng.choice(["[]", "5", '"x"', "null", "[" + text + "]"])
    if roll < 0.10:
        return "\ufeff" + text
    return text


def _looprail(argv: list[str]) -> tuple[int, str]:
    from looprail.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue()


def _reference(jobs: list[dict[str, Any]], home: Path) -> list[dict[str, str]]:
    env = dict(os.environ, HOME=str(home), GSD_HOME=str(home))
    env.pop("GSD_WORKSTREAM", None)
    results = home / "results.jsonl"
    subprocess.run(
        ["node", str(DRIVER), REFERENCE, str(results)],
        input="\n".join(json.dumps(j) for j in jobs) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=True,
    )
    text = results.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line]


def test_fuzz_configs_against_the_reference(tmp_path, monkeypatch):
    declared, keys, by_point = _corpus()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("LOOPRAIL_HOME", str(home / ".looprail"))
    all_ids = [*sorted(set().union(*by_point.values())), "no-such-cap"]
    projects, jobs, sampled = {}, [], []
    for seed in range(FIRST, FIRST + SEEDS):
        project = tmp_path / f"seed-{seed}"
        (project / ".planning").mkdir(parents=True)
        text = generate(seed, declared, keys)
        if text is not None:
            (project / ".planning" / "config.json").write_text(text, encoding="utf-8")
        projects[seed] = (project, text)
        rng = random.Random(-seed - 1)
        for point in POINTS:
            jobs.append({"cwd": str(project), "point": point})
            sampled.append((seed, point, None))
            cap = rng.choice(sorted(by_point[point]) or ["no-such-cap"])
            jobs.append({"cwd": str(project), "point": point, "activeCap": cap})
            sampled.append((seed, point, cap))
    results = _reference(jobs, home)
    assert len(results) == len(jobs)
    diffs: list[str] = []
    envelopes: dict[tuple[int, str], dict[str, Any]] = {}
    for (seed, point, cap), ref in zip(sampled, results, strict=True):
        project, text = projects[seed]
        argv = ["loop", "render-hooks", point, "--project", str(project),
                "--capabilities", str(GSD_CAPABILITIES)]  # fmt: skip
        if cap is None:
            code, out = _looprail([*argv, "--raw"])
            if code != 0 or out != ref["stdout"]:
                diffs.append(f"seed {seed} {point}: --raw differs\nconfig: {text}")
                continue
            envelopes[(seed, point)] = json.loads(out)
        else:
            code, out = _looprail([*argv, "--active-cap", cap])
            if out != ref["stdout"]:
                diffs.append(
                    f"seed {seed} {point} --active-cap {cap}: {out!r} vs {ref['stdout']!r}"
                )
    # Every capability id at every point, against the reference's envelope (its --active-cap is
    # `activeHooks.some(h => h.capId === id)`), through the function the CLI flag calls.
    from looprail.config import load_project_config
    from looprail.hooks.compiled import load_compiled
    from looprail.hooks.resolve import active_cap

    for (seed, point), env in envelopes.items():
        project, text = projects[seed]
        compiled = load_compiled(project, [GSD_CAPABILITIES])
        config, _ = load_project_config(project)
        active = {h["capId"] for h in env["activeHooks"]}
        for cap in all_ids:
            if active_cap(compiled, config, point, cap) != (cap in active):
                diffs.append(f"seed {seed} {point} active_cap {cap}\nconfig: {text}")
    assert not diffs, f"{len(diffs)} differences; first: " + "\n".join(diffs[:3])


# A well-formed file nested deeper than Python's JSON parser reads is a deliberate difference
# (JSON.parse reads it, looprail refuses it in one line; docs/security.md, test_hostile.py).
HOSTILE_FILES = {
    "deep-malformed": b'{"workflow": {"research": false}, "d": '
    + b"[" * 100_000
    + b"]" * 99_999
    + b"}",
    "large": b'{"pad": "' + b"x" * (12 << 20) + b'", "workflow": {"research": false}}',
    "duplicates": b'{"workflow": {"research": false}, "workflow": {"ui_phase": false}}',
    "bad-utf8": b'{"workflow": {"research": false, "x": "\xff\xc0\xed\xa0\x80"}}',
    "bom": b'\xef\xbb\xbf{"workflow": {"research": false}}',
    "big-numbers": b'{"workflow": {"security_asvs_level": 9007199254740993, "drift_threshold":'
    b' 1e400, "security_block_on": "low"}}',
}


def test_large_and_deep_files_against_the_reference(tmp_path, monkeypatch):
    """Very deep, large, duplicate-key, badly encoded files: the same bytes as the reference."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("LOOPRAIL_HOME", str(home / ".looprail"))
    jobs, names = [], []
    for name, raw in HOSTILE_FILES.items():
        project = tmp_path / name
        (project / ".planning").mkdir(parents=True)
        (project / ".planning" / "config.json").write_bytes(raw)
        for point in ("plan:pre", "verify:pre"):
            jobs.append({"cwd": str(project), "point": point})
            names.append((name, project, point))
    for (name, project, point), ref in zip(names, _reference(jobs, home), strict=True):
        argv = ["loop", "render-hooks", point, "--raw", "--project", str(project),
                "--capabilities", str(GSD_CAPABILITIES)]  # fmt: skip
        code, out = _looprail(argv)
        assert code == 0 and out == ref["stdout"], (name, point)
