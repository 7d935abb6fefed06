"""Fail loud (issue 12): `looprail run` refuses to start when a hook or gate would be dropped
silently, and the hostile-input holes found by running the CLI are closed. Every test goes through
the CLI (a subprocess or `looprail.cli.main`) and failed before its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import HOSTILE, REPO, examples, feature, run_cli, write_capability

EXAMPLE = REPO / "examples" / "hello-loop"
CAPS = REPO / "examples" / "capabilities"


def _gate(point: str = "ship:pre") -> dict:
    return {
        "point": point,
        "check": {"predicate": {"kind": "artifact-exists", "artifact": "NOPE.md"}},
        "blocking": True,
        "onError": "halt",
    }


# --------------------------------------------------------------------------- nothing dropped


def _assert_refused(p, *needles: str) -> None:
    assert p.returncode == 1, p.stdout + p.stderr
    assert "refusing to start" in p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in p.stderr, p.stderr
    assert "shipped" not in p.stdout


def test_run_refuses_a_missing_capabilities_folder(hello, tmp_path):
    missing = tmp_path / "no-such-caps"
    p = run_cli(
        "run",
        str(hello),
        "--phase",
        "1",
        "--capabilities",
        str(CAPS),
        "--capabilities",
        str(missing),
    )
    _assert_refused(p, f"{missing}: capability folder does not exist", "fix: correct the path")
    assert not (hello / ".looprail" / "journal.sqlite").exists()
    assert not list((hello / ".planning/phases/01-greeting").glob("*-SUMMARY.md"))


def test_run_refuses_a_capability_that_failed_to_load(hello, tmp_path):
    caps = tmp_path / "caps"
    shutil.copytree(CAPS, caps)
    (caps / "broken").mkdir()
    (caps / "broken" / "capability.json").write_text('{"id": "broken", "gates": [')
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(caps))
    _assert_refused(
        p,
        "capability 'broken' (first-party) failed to load",
        "not valid JSON",
        "fix: fix the manifest",
    )
    # one line per problem (+ the summary line)
    assert len([x for x in p.stderr.splitlines() if "error:" in x]) == 2


def test_run_refuses_an_unconsented_project_capability_with_gates(hello):
    write_capability(hello / ".looprail" / "capabilities", feature("extra-gate", gates=[_gate()]))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    _assert_refused(
        p, "project capability 'extra-gate' declares gates at ship:pre", "run `looprail trust`"
    )
    # consent lifts the refusal: the gate is then evaluated (and blocks: NOPE.md is absent)
    t = run_cli("trust", "--project", str(hello), "--yes")
    assert t.returncode == 0, t.stderr
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))
    assert p.returncode == 1 and "BLOCKED" in p.stderr, p.stderr


def test_lint_reports_the_same_as_errors(hello, tmp_path):
    write_capability(hello / ".looprail" / "capabilities", feature("extra-gate", gates=[_gate()]))
    missing = tmp_path / "no-such-caps"
    p = run_cli(
        "lint",
        "--project",
        str(hello),
        "--capabilities",
        str(CAPS),
        "--capabilities",
        str(missing),
        "--json",
    )
    report = json.loads(p.stdout)
    codes = {f["code"]: f for f in report["findings"] if f["severity"] == "error"}
    assert "capability-folder-missing" in codes and "capability-gates-untrusted" in codes
    assert p.returncode == 1


def test_render_hooks_keeps_the_fail_open_warning(hello, tmp_path):
    caps = tmp_path / "caps"
    shutil.copytree(CAPS, caps)
    (caps / "broken").mkdir()
    (caps / "broken" / "capability.json").write_text(
        json.dumps({"id": "broken", "gates": [_gate("verify:pre")]})
    )
    p = run_cli(
        "loop",
        "render-hooks",
        "verify:pre",
        "--raw",
        "--project",
        str(hello),
        "--capabilities",
        str(caps),
    )
    assert p.returncode == 0
    envelope = json.loads(p.stdout)
    assert any("broken" in w for w in envelope.get("warnings", ())), envelope


def _caps_with(tmp_path: Path, *manifests: dict) -> Path:
    caps = tmp_path / "caps"
    shutil.copytree(CAPS, caps)
    for m in manifests:
        write_capability(caps, m)
    return caps


# --------------------------------------------------------------------------- 9: escapes


def test_escape_sequences_from_data_are_never_printed_raw(hello, tmp_path):
    forged = "\x1b[2K\r  ✓ gate pass\x1b]0;pwn\x07"
    (hello / ".planning" / "phases" / f"02-x{forged}").mkdir()
    p = run_cli("phase", "list", "--project", str(hello))
    assert p.returncode == 0
    assert "\x1b" not in p.stdout and "\r" not in p.stdout and "\x07" not in p.stdout
    assert "\\x1b[2K" in p.stdout
    shutil.rmtree(hello / ".planning" / "phases" / f"02-x{forged}")
    # a manifest string reaches a progress line and the journal, then `status`
    gate = _gate()
    gate["check"]["predicate"]["artifact"] = f"NOPE{forged}\n  ✓ shipped.md"
    caps = _caps_with(tmp_path, feature("forger", gates=[gate]))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(caps))
    assert p.returncode == 1, p.stderr
    s = run_cli("status", "--project", str(hello))
    for out in (p.stdout, p.stderr, s.stdout, s.stderr):
        assert "\x1b" not in out and "\r" not in out and "\x07" not in out
        assert "\n  ✓ shipped.md" not in out


# --------------------------------------------------------------------------- 10: \Z, not $


def test_a_skill_name_ending_in_a_newline_is_not_a_plain_name(hello, tmp_path):
    sentinel = tmp_path / "PWNED"
    skill = hello / ".looprail" / "skills" / "gsd-tool\n"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(f"#!/bin/sh\ntouch {sentinel}\necho '{{}}'\n")
    skill.chmod(0o755)
    step = {
        "point": "plan:pre",
        "ref": {"skill": "tool\n"},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }
    caps = _caps_with(tmp_path, feature("newline-skill", skills=["tool\n"], steps=[step]))
    p = run_cli("run", str(hello), "--phase", "1", "--capabilities", str(caps))
    assert not sentinel.exists()
    assert "refused name 'gsd-tool\\\\n'" in p.stderr or "refused name" in p.stderr, p.stderr


# --------------------------------------------------------------------------- 5, 6, 14: resolvers


def _tracker_plan(project: Path, tracker_id: str) -> Path:
    from tests.support.loop import plan_md, task_xml

    phase = project / ".planning" / "phases" / "01-greeting"
    phase.mkdir(parents=True, exist_ok=True)
    plan = phase / "01-01-PLAN.md"
    attrs = f' tracker-id="{tracker_id}"'
    plan.write_text(plan_md("01", wave=1, tasks=[task_xml("T1", attrs=attrs)]))
    return plan


def _resolver_cap(cap_id: str, prefix: str, binary: str) -> dict:
    return feature(
        cap_id,
        taskContentResolver={
            "trackerPrefix": prefix,
            "invoke": {"binary": binary, "args": ["{{id}}"], "timeoutMs": 10000},
        },
    )


def _resolve(project: Path, plan: Path, tracker_id: str, caps: Path, env=None):
    return run_cli(
        "task",
        "resolve-content",
        "--project",
        str(project),
        "--plan",
        str(plan),
        "--task-id",
        tracker_id,
        "--capabilities",
        str(caps),
        env=env,
    )


def test_a_tracker_id_cannot_inject_an_option_into_the_resolver(hello, tmp_path):
    target = tmp_path / "INJECTED"
    script = tmp_path / "tracker.py"
    script.write_text(
        "#!/usr/bin/env python3\nimport sys, json\n"
        "for a in sys.argv[1:]:\n"
        "    if a.startswith('--output='):\n"
        "        open(a.split('=', 1)[1], 'w').write('x')\n"
        "print(json.dumps({'description': 'd'}))\n"
    )
    script.chmod(0o755)
    caps = tmp_path / "caps"
    write_capability(caps, _resolver_cap("git-tracker", "git", str(script)))
    tid = f"git:--output={target}"
    plan = _tracker_plan(hello, tid)
    p = _resolve(hello, plan, tid, caps)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "starts with '-'" in p.stderr and "Traceback" not in p.stderr
    assert not target.exists()


def test_a_bare_resolver_binary_is_not_found_in_the_project_through_an_empty_path_entry(
    hello, tmp_path
):
    import os

    sentinel = tmp_path / "PLANTED-RAN"
    planted = hello / "looprail-test-tracker"
    planted.write_text(f'#!/bin/sh\ntouch {sentinel}\necho \'{{"description": "x"}}\'\n')
    planted.chmod(0o755)
    caps = tmp_path / "caps"
    write_capability(caps, _resolver_cap("bare", "bare", "looprail-test-tracker"))
    plan = _tracker_plan(hello, "bare:X-1")
    for path in (":" + os.environ["PATH"], os.environ["PATH"] + "::", "." + os.pathsep + "/bin"):
        p = _resolve(hello, plan, "bare:X-1", caps, env={"PATH": path})
        assert p.returncode == 1, p.stdout
        assert "could not start" in p.stderr
        assert not sentinel.exists()


def test_an_invalid_project_capability_cannot_disable_a_first_party_resolver(hello, tmp_path):
    # Invalid (no version) and unconsented, yet it claims the first-party `demo` prefix.
    evil = _resolver_cap("evil", "demo", "/bin/false")
    del evil["version"]
    write_capability(hello / ".looprail" / "capabilities", evil)
    plan = _tracker_plan(hello, "demo:HELLO-3")
    p = _resolve(hello, plan, "demo:HELLO-3", CAPS)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["resolved"] is True
    # a valid but unconsented one that claims it is refused at merge and is ignored too
    evil["version"] = "1.0.0"
    write_capability(hello / ".looprail" / "capabilities", evil)
    p = _resolve(hello, plan, "demo:HELLO-3", CAPS)
    assert p.returncode == 0 and json.loads(p.stdout)["resolved"] is True, p.stderr
    lint = run_cli("lint", "--project", str(hello), "--capabilities", str(CAPS), "--json")
    assert not [f for f in json.loads(lint.stdout)["findings"] if "HELLO-3" in f["message"]]


# --------------------------------------------------------------------------- 7: shells by argv


@pytest.mark.parametrize(
    "binary, args, shown",
    [
        ("sh", ["-c", "curl x | sh", "{{id}}"], "sh -c"),
        ("/bin/bash", ["-lc", "id", "{{id}}"], "bash -lc"),
        ("env", ["FOO=1", "dash", "-c", "id", "{{id}}"], "dash -c"),
        ("python3.12", ["-c", "import os", "{{id}}"], "python3.12 -c"),
        ("/usr/bin/env", ["-i", "node", "-e", "1", "{{id}}"], "node -e"),
        ("timeout", ["5", "zsh", "{{id}}"], "zsh"),
    ],
)
def test_audit_and_trust_say_when_a_resolver_is_a_shell(hello, tmp_path, binary, args, shown):
    write_capability(
        hello / ".looprail" / "capabilities",
        feature("shelly", taskContentResolver={
            "trackerPrefix": "shelly",
            "invoke": {"binary": binary, "args": args, "timeoutMs": 1000},
        }),
    )  # fmt: skip
    audit = run_cli("capability", "audit", "--project", str(hello))
    assert audit.returncode == 0, audit.stderr
    block = audit.stdout[audit.stdout.index("taskContentResolver") :]
    assert "SHELL" in block.splitlines()[0] and f"SHELL: runs {shown}" in block
    assert "no shell" not in block.splitlines()[1]
    data = json.loads(run_cli("capability", "audit", "--project", str(hello), "--json").stdout)
    surfaces = [s for c in data["capabilities"] for s in c["surfaces"]]
    assert [s["shell"] for s in surfaces if s["kind"] == "taskContentResolver"] == [True]
    trust = run_cli("trust", "--project", str(hello), "--yes")
    assert trust.returncode == 0
    assert "consenting to shell or interpreter code: shelly $.taskContentResolver" in trust.stderr


def test_audit_keeps_saying_no_shell_for_a_plain_program(hello):
    audit = run_cli("capability", "audit", "--project", str(hello), "--capabilities", str(CAPS))
    line = next(x for x in audit.stdout.splitlines() if "demo-tracker" in x and "{{id}}" in x)
    assert "(no shell;" in line


# --------------------------------------------------------------------------- 3: alias bomb


def test_an_alias_bomb_in_frontmatter_is_refused_not_expanded(hello):
    import subprocess
    import sys

    phase = hello / ".planning" / "phases" / "01-greeting"
    phase.mkdir(parents=True, exist_ok=True)
    shutil.copy(HOSTILE / "frontmatter" / "alias-bomb.md", phase / "01-VERIFICATION.md")
    predicate = {
        "kind": "artifact-frontmatter-equals",
        "artifact": "VERIFICATION.md",
        "field": "status",
        "equals": "passed",
    }
    cmd = [sys.executable, "-c", "import sys; from looprail.cli import main; sys.exit(main())"]
    p = subprocess.run(
        [*cmd, "check", "predicate", "--predicate", json.dumps(predicate), "--phase", "1",
         "--project", str(hello)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # `artifact-frontmatter-equals` reads `key: value` lines as the reference does (no YAML):
    # the bomb is plain text there, answered at once and never expanded
    assert p.returncode == 0 and json.loads(p.stdout)["block"] is False, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    # a PLAN.md carrying one is a plan error naming the line
    plan = phase / "01-01-PLAN.md"
    plan.write_text("---\nphase: 01\nplan: '01'\nx: &x [1]\ny: *x\n---\n<tasks></tasks>\n")
    lint = run_cli("lint", "--project", str(hello))
    assert "01-01-PLAN.md: line 5" in lint.stdout and "alias *x is not allowed" in lint.stdout
    plan.unlink()
    # `run` reads VERIFICATION.md's status: it must not hang; an unreadable status is no status,
    # so the verifier does the verify work again (and writes a readable one)
    p = subprocess.run(
        [*cmd, "run", str(hello), "--phase", "1", "--capabilities", str(CAPS)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in p.stderr
    assert "verifier did the verify work" in p.stderr, p.stderr
    assert "*l0" not in (phase / "01-VERIFICATION.md").read_text()


# --------------------------------------------------------------------------- 11: linear-ish


def _one_line_plan(size: int) -> str:
    """Frontmatter, then one line of `size` bytes: backtick runs of distinct lengths (no run has
    a partner) and unclosed `<!--` and `<b>` (a backtracking scan is quadratic in each)."""
    parts, k, total = [], 1, 0
    while total < size // 2:
        parts.append("`" * k + "a")
        total += k + 1
        k += 1
    rest = (size - total) // 3
    line = "".join(parts) + "<!--" * (rest // 8) + "<b>" * (rest // 6)
    return "---\nphase: 01\nplan: '01'\ntype: execute\n---\n<tasks></tasks>\n" + line + "\n"


def test_an_8_mib_one_line_plan_is_read_in_linear_time(tmp_path):
    import subprocess
    import sys

    project = tmp_path / "project"
    phase = project / ".planning" / "phases" / "01-demo"
    phase.mkdir(parents=True)
    (phase / "01-01-PLAN.md").write_text(_one_line_plan(8 * 1024 * 1024))
    cmd = [sys.executable, "-c", "import sys; from looprail.cli import main; sys.exit(main())"]
    # Linear takes a few seconds even on a loaded 2-core machine; the backtracking scan took
    # minutes (quadratic in the runs on the line).
    p = subprocess.run(
        [*cmd, "phase", "plan-index", "1", "--project", str(project)],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert "Traceback" not in p.stderr
    assert p.returncode in (0, 1), p.stderr


def test_waves_of_chained_plans_are_built_in_linear_time():
    import time

    from looprail.plans.planfile import parse_plan
    from looprail.plans.waves import compute_waves
    from tests.support.loop import plan_md, task_xml

    base = parse_plan(plan_md("0001", tasks=[task_xml("T1")]), path="01-0001-PLAN.md")

    def chain(n: int) -> list:
        return [
            base.model_copy(update={
                "id": f"01-{i:04d}", "path": Path(f"01-{i:04d}-PLAN.md"),
                "depends_on": [f"01-{i - 1:04d}"] if i > 1 else [],
            })
            for i in range(1, n + 1)
        ]  # fmt: skip

    def took(plans: list) -> float:
        start = time.perf_counter()
        waves = compute_waves(plans)
        assert len(waves.waves) == len(plans)
        return time.perf_counter() - start

    import gc

    small, big = chain(500), chain(4000)
    took(small)  # warm up (imports, caches)
    gc.collect()
    gc.disable()  # a collection of the suite's heap inside one timing is noise, not growth
    try:
        t_small = min(took(small) for _ in range(3))
        t_big = min(took(big) for _ in range(2))
    finally:
        gc.enable()
    # 8x the plans: linear is ~8x the time, the quadratic grouping was ~60-100x.
    assert t_big < 24 * t_small + 0.2, (t_small, t_big)


# --------------------------------------------------------------------------- 12: next-turn.json


@pytest.mark.parametrize(
    "body, reason",
    [
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
        ('[{"message": "x"},', "not valid JSON"),
    ],
)
def test_a_broken_next_turn_queue_is_one_line(hello, tmp_path, body, reason):
    home = tmp_path / "lhome"
    home.mkdir()
    hooks = {"local": {"lint": {"description": "d", "event": "plan:pre", "shell": "true"}}}
    (home / "hooks.json").write_text(json.dumps(hooks))
    queue = hello / ".looprail" / "next-turn.json"
    queue.write_text(body)
    p = run_cli(
        "run",
        str(hello),
        "--phase",
        "1",
        "--capabilities",
        str(CAPS),
        env={"LOOPRAIL_HOME": str(home)},
    )
    assert "Traceback" not in p.stderr
    assert p.returncode == 1, p.stderr  # refused before the run started (tests/test_run_inputs)
    assert f"{queue}: $: {reason}" in p.stderr
    assert len(p.stderr.strip().splitlines()) <= 3, p.stderr


# --------------------------------------------------------------------------- 2: fragment bytes


def _contribution(path: str, n: int) -> dict:
    return {"point": "plan:pre", "into": "planner", "fragment": {"path": path},
            "produces": [], "consumes": [], "onError": "skip", "id": n}  # fmt: skip


# The child reports its own peak RSS: VmHWM, the high-water mark of its own address space.
# Not ru_maxrss: Linux carries the spawning process's RSS into a child's ru_maxrss across
# fork/vfork and exec, so a child of a 440 MB test worker "peaked" at 440 MB before its first
# line (why this test once failed in full runs only).
MEASURED_PEAK = (
    "import sys\n"
    "from looprail.cli import main\n"
    "code = main()\n"
    "status = open('/proc/self/status').read()\n"
    "peak = int(status.split('VmHWM:', 1)[1].split()[0])\n"
    "sys.stderr.write(f'\\nPEAK_KIB {peak}\\n')\n"
    "sys.exit(code)\n"
)


def peak_of(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    """Run `looprail ARGV` in a fresh interpreter; (its own peak RSS in KiB, stdout, stderr)."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc/self/status (VmHWM) to measure a child's own peak")
    p = subprocess.run(
        [sys.executable, "-c", MEASURED_PEAK, *argv],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    head, _, peak = p.stderr.rpartition("PEAK_KIB ")
    return int(peak.split()[0]), p.stdout, head


def test_one_big_fragment_named_fifty_times_is_bounded(hello, tmp_path):
    caps_root = hello / ".looprail" / "capabilities"
    entries = [_contribution("big.md", n) for n in range(50)]
    for e in entries:
        del e["id"]
    folder = write_capability(caps_root, feature("hog", contributions=entries))
    (folder / "big.md").write_text("x" * (8 * 1024 * 1024))
    cache = tmp_path / "cache"
    env = {"LOOPRAIL_CACHE_DIR": str(cache)}
    argv = ("loop", "render-hooks", "plan:pre", "--raw", "--project", str(hello))
    for _ in range(2):  # cold cache, then warm
        peak_kib, _, _ = peak_of(*argv, env=env)
        # Measured ~50 MB cold (the interpreter ~13 MB, the 8 MiB file read once as bytes and
        # text); 50 copies of it would be 400 MB.
        assert peak_kib < 100 * 1024, f"peak RSS {peak_kib} KiB"
    cached = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
    assert cached < 1024 * 1024, f"registry cache holds {cached} bytes"
    listing = run_cli("capability", "list", "--project", str(hello), env=env)
    assert "fragments of this capability total more than" in listing.stdout + listing.stderr


def test_project_fragments_are_read_only_with_consent_and_never_cached(hello, tmp_path):
    caps_root = hello / ".looprail" / "capabilities"
    entries = [_contribution("note.md", n) for n in range(3)]
    for e in entries:
        del e["id"]
    entries[1]["into"] = "researcher"
    entries[2]["into"] = "checker"
    folder = write_capability(caps_root, feature("noted", contributions=entries))
    (folder / "note.md").write_text("SECRET-NOTE-TEXT " * 1000)
    cache = tmp_path / "cache"
    env = {"LOOPRAIL_CACHE_DIR": str(cache)}
    args = ("loop", "render-hooks", "plan:pre", "--raw", "--project", str(hello))
    before = json.loads(run_cli(*args, env=env).stdout)
    assert "SECRET-NOTE-TEXT" not in json.dumps(before)
    assert run_cli("trust", "--project", str(hello), "--yes", env=env).returncode == 0
    for _ in range(2):  # built, then served from the cache
        after = json.loads(run_cli(*args, env=env).stdout)
        hooks = [h for h in after["activeHooks"] if h["capId"] == "noted"]
        assert hooks and all("SECRET-NOTE-TEXT" in h["fragment"]["inline"] for h in hooks)
    for f in cache.rglob("*"):
        if f.is_file():
            assert b"SECRET-NOTE-TEXT" not in f.read_bytes()


# --------------------------------------------------------------------------- 13: symlinks out


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in folder.rglob("*") if f.is_file()}


def test_a_symlinked_phase_folder_looprail_or_plan_out_of_the_project_is_refused(hello, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    args = ("run", str(hello), "--phase", "1", "--capabilities", str(CAPS))

    # the phase folder
    phase = hello / ".planning" / "phases" / "01-greeting"
    shutil.rmtree(phase, ignore_errors=True)
    (outside / "01-greeting").mkdir()
    phase.symlink_to(outside / "01-greeting")
    before = _snapshot(outside)
    p = run_cli(*args)
    assert p.returncode == 1 and "the phase folder is a symlink to" in p.stderr, p.stderr
    assert "outside the project; refused" in p.stderr and "Traceback" not in p.stderr
    assert _snapshot(outside) == before
    phase.unlink()
    phase.mkdir()

    # a PLAN.md
    (outside / "01-01-PLAN.md").write_text("---\nphase: 01\nplan: '01'\n---\n<tasks></tasks>\n")
    (phase / "01-01-PLAN.md").symlink_to(outside / "01-01-PLAN.md")
    p = run_cli(*args)
    # A plan already there is read before the run starts: refused then (exit 1), not journaled.
    assert p.returncode == 1 and "the plan is a symlink to" in p.stderr, p.stderr
    assert not list(outside.glob("*SUMMARY*"))
    (phase / "01-01-PLAN.md").unlink()

    # .looprail/ (journal, lock, agents)
    shutil.move(str(hello / ".looprail"), str(outside / "dot-looprail"))
    (hello / ".looprail").symlink_to(outside / "dot-looprail")
    before = _snapshot(outside)
    p = run_cli(*args)
    assert p.returncode == 1 and ".looprail: the folder is a symlink to" in p.stderr, p.stderr
    assert _snapshot(outside) == before  # the journal there was not opened for writing


def test_fragment_text_of_the_whole_search_path_is_bounded(hello, tmp_path):
    caps = tmp_path / "caps"
    for n in range(5):  # 5 x 16 MiB: each within its own bound, the fifth over the total
        entries = [_contribution("big.md", n) for _ in range(2)]
        for e in entries:
            del e["id"]
        entries[1]["into"] = "researcher"
        folder = write_capability(caps, feature(f"big-{n}", contributions=entries))
        (folder / "big.md").write_text("y" * (8 * 1024 * 1024))
    p = run_cli(
        "capability",
        "list",
        "--project",
        str(hello),
        "--capabilities",
        str(caps),
        env={"LOOPRAIL_NO_CACHE": "1"},
    )
    lines = [x for x in p.stdout.splitlines() if x.startswith("big-")]
    assert len(lines) == 5, p.stdout + p.stderr
    assert "FAILED" in lines[4] and "fragments of all capabilities would exceed" in lines[4]
    assert all("FAILED" not in x for x in lines[:4])


# --------------------------------------------------------------------------- properties


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet="`a \n<!->", max_size=60))
def test_linear_code_span_masking_matches_the_backtracking_regex(text):
    """The linear scanner blanks exactly what the old regex did (on inputs small enough for it)."""
    import re

    from looprail.plans.scan import _blank_code_spans

    old = re.compile(r"(?<!`)(`+)(?!`)([^\n]+?)(?<!`)\1(?!`)")
    expected = old.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    out = list(text)
    _blank_code_spans(out)
    assert "".join(out) == expected


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet="<!-> \nab", max_size=60))
def test_linear_comment_masking_matches_the_regex(text):
    import re

    from looprail.plans.scan import _blank_comments

    expected = re.compile(r"<!--.*?-->", re.S).sub(
        lambda m: re.sub(r"[^\n]", " ", m.group(0)), text
    )
    out = list(text)
    _blank_comments(out)
    assert "".join(out) == expected


@given(st.text())
def test_printed_text_never_carries_a_control_character(text):
    from looprail.textsafe import multi_line, one_line

    def controls(s: str) -> set[str]:
        return {c for c in s if ord(c) < 0x20 or ord(c) == 0x7F or 0x80 <= ord(c) < 0xA0}

    assert controls(one_line(text)) == set()
    assert controls(multi_line(text)) <= {"\n", "\t"}
    assert one_line(text) == text or controls(text)
