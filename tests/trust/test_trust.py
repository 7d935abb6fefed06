"""Consent: folder hashes, the consent store, and consent applied wherever capabilities load
(the hot-path compiled registry, `capability list`, the runner's resolvers, native hooks)."""

from __future__ import annotations

import json
import os

import pytest

from looprail import load_compiled
from looprail.hooks.registry import load_registry
from looprail.hooks.resolve import resolve
from looprail.trust import (
    CHANGED,
    NO_CONSENT,
    TrustError,
    apply_consent,
    consent_state,
    folder_hash,
    grant,
    hooks_hash,
    is_trusted,
    revoke,
)
from looprail.trust.store import store_path
from tests.support import feature, run_cli, write_capability


def step(skill: str, point: str = "plan:pre") -> dict:
    return {
        "point": point,
        "ref": {"skill": skill},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }


def overlay(project, cap_id="extra", files=None):
    """A project-scope (third-party) capability with one step at plan:pre."""
    return write_capability(
        project / ".looprail" / "capabilities",
        feature(cap_id, skills=["lint"], steps=[step("lint")]),
        files=files or {"scripts/run.sh": "echo hi\n"},
    )


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "project"
    (p / ".planning").mkdir(parents=True)
    return p


# --------------------------------------------------------------------------- folder_hash


def test_folder_hash_covers_every_file_name_and_byte(tmp_path):
    d = write_capability(tmp_path, feature("cap"), files={"a/b/c.txt": "one", "x.md": "two"})
    first = folder_hash(d)
    assert first == folder_hash(d)  # deterministic
    (d / "a" / "b" / "c.txt").write_text("onE")
    assert folder_hash(d) != first
    (d / "a" / "b" / "c.txt").write_text("one")
    assert folder_hash(d) == first
    (d / "x.md").rename(d / "y.md")  # a rename is a change
    assert folder_hash(d) != first
    (d / "y.md").rename(d / "x.md")
    (d / "new").write_text("")  # so is an added empty file
    assert folder_hash(d) != first


def test_folder_hash_counts_an_inner_symlink_by_its_target_content(tmp_path):
    real = write_capability(tmp_path / "a", feature("cap"), files={"t.txt": "data", "l": "data"})
    linked = write_capability(tmp_path / "b", feature("cap"), files={"t.txt": "data"})
    (linked / "l").symlink_to("t.txt")
    assert folder_hash(linked) == folder_hash(real)


@pytest.mark.parametrize("kind", ["outside", "folder", "dangling", "fifo"])
def test_folder_hash_refuses_what_cannot_be_consented_to(tmp_path, kind):
    d = write_capability(tmp_path / "caps", feature("cap"), files={"sub/x": "x"})
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of the capability")
    if kind == "outside":
        (d / "leak").symlink_to(secret)
    elif kind == "folder":
        (d / "dir-link").symlink_to(d / "sub")
    elif kind == "dangling":
        (d / "gone").symlink_to(d / "missing")
    else:
        os.mkfifo(d / "pipe")  # reading it would hang: it must be refused, not read
    with pytest.raises(TrustError) as err:
        folder_hash(d)
    assert str(d) in str(err.value)


# --------------------------------------------------------------------------- the store


def _stored(project) -> dict[str, str]:
    """The capability consents the store holds for `project`."""
    if not os.path.exists(store_path()):
        return {}
    with open(store_path()) as fh:
        projects = json.load(fh)["projects"]
    return projects.get(os.path.realpath(project), {}).get("capabilities", {})


def test_grant_consented_revoke_round_trip(project):
    folder = overlay(project)
    assert consent_state(project, "extra", folder) == NO_CONSENT
    grant(project, {"extra": folder_hash(folder)})
    assert consent_state(project, "extra", folder) is None
    assert _stored(project) == {"extra": folder_hash(folder)}
    (folder / "scripts" / "run.sh").write_text("echo HI\n")
    assert consent_state(project, "extra", folder) == CHANGED
    assert revoke(project) == ["capability extra"]
    assert consent_state(project, "extra", folder) == NO_CONSENT
    assert revoke(project) == []


def test_store_is_keyed_by_real_path_and_written_atomically(project, tmp_path):
    folder = overlay(project)
    alias = tmp_path / "alias"
    alias.symlink_to(project)
    grant(alias, {"extra": folder_hash(folder)})
    assert consent_state(project, "extra", folder) is None
    path = store_path()
    with open(path) as fh:
        data = json.load(fh)
    assert list(data["projects"]) == [os.path.realpath(project)]
    leftovers = [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".consent-")]
    assert leftovers == []
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_a_malformed_store_means_no_consent_and_is_never_overwritten(project):
    folder = overlay(project)
    grant(project, {"extra": folder_hash(folder)})
    path = store_path()
    with open(path, "w") as fh:
        fh.write("{not json")
    assert consent_state(project, "extra", folder) is not None
    with pytest.raises(TrustError) as err:
        grant(project, {"extra": folder_hash(folder)})
    assert path in str(err.value) and "\n" not in str(err.value)
    with open(path) as fh:
        assert fh.read() == "{not json"


def test_hooks_file_trust_is_bound_to_its_bytes(project):
    assert not is_trusted(project)  # no file: nothing to trust
    hooks = project / ".looprail" / "hooks.json"
    hooks.parent.mkdir(parents=True)
    hooks.write_text('{"local": {}}')
    assert not is_trusted(project)
    grant(project, hooks=hooks_hash(project))
    assert is_trusted(project)
    hooks.write_text('{"local": {} }')
    assert not is_trusted(project)
    assert revoke(project, hooks=True) == ["hooks.json"]


# --------------------------------------------------------------------------- applied


def test_apply_consent_switches_off_unconsented_project_capabilities(project, tmp_path):
    first_party = tmp_path / "fp"
    write_capability(first_party, feature("own", skills=["s"], steps=[step("s")]))
    folder = overlay(project)
    loaded = load_registry(project, [first_party])
    registry = apply_consent(loaded)
    assert loaded.capabilities["extra"].consent is None  # the loaded set is not changed
    assert registry.capabilities["own"].active and registry.capabilities["own"].consent is None
    assert not registry.capabilities["extra"].active
    assert registry.capabilities["extra"].consent is False
    assert registry.capabilities["extra"].inactive_reason == NO_CONSENT
    grant(project, {"extra": folder_hash(folder)})
    registry = apply_consent(load_registry(project, [first_party]))
    assert registry.capabilities["extra"].active
    assert registry.capabilities["extra"].consent is True


def test_compiled_registry_gets_consent_at_read_time_not_from_the_cache(project):
    folder = overlay(project)
    compiled = load_compiled(project)
    assert compiled.capabilities["extra"].consent is False
    assert resolve(compiled, None, "plan:pre")["activeHooks"] == []
    grant(project, {"extra": folder_hash(folder)})
    cached = load_compiled(project)  # same manifests: a cache hit, consent read afresh
    assert [h["capId"] for h in resolve(cached, None, "plan:pre")["activeHooks"]] == ["extra"]
    (folder / "scripts" / "run.sh").write_text("echo changed\n")  # not a manifest: cache hit
    again = load_compiled(project)
    assert again.capabilities["extra"].inactive_reason == CHANGED
    assert resolve(again, None, "plan:pre")["activeHooks"] == []


def test_runner_resolvers_exclude_unconsented_capabilities(project):
    from looprail.machine.session.phase import load_project

    resolver = {
        "trackerPrefix": "jira",
        "invoke": {"binary": "true", "args": ["{{id}}"], "timeoutMs": 1000},
    }
    folder = write_capability(
        project / ".looprail" / "capabilities", feature("tracker", taskContentResolver=resolver)
    )
    assert load_project(project).resolvers == []
    grant(project, {"tracker": folder_hash(folder)})
    assert [cid for cid, _ in load_project(project).resolvers] == ["tracker"]


# --------------------------------------------------------------------------- through the CLI


def render(project, point="plan:pre"):
    p = run_cli("loop", "render-hooks", point, "--raw", "--project", str(project))
    assert p.returncode == 0, p.stderr
    return [h["capId"] for h in json.loads(p.stdout)["activeHooks"]]


def listed(project):
    p = run_cli("capability", "list", "--json", "--project", str(project))
    assert p.returncode == 0, p.stderr
    return {r["id"]: (r["active"], r["reason"]) for r in json.loads(p.stdout)["capabilities"]}


def test_trust_and_revoke_through_the_cli(project):
    folder = overlay(project, files={"fragments/note.md": "hello\n", "bin/tool": "#!/bin/sh\n"})
    assert render(project) == []
    assert listed(project)["extra"] == (False, NO_CONSENT)
    text = run_cli("capability", "list", "--project", str(project)).stdout
    assert "inactive (no consent (run `looprail trust`))" in text

    p = run_cli("trust", "--project", str(project), "--yes", subprocess=True)
    assert p.returncode == 0, p.stderr
    assert "capability extra" in p.stdout and "skill gsd-lint" in p.stdout  # the audit was shown
    assert render(project) == ["extra"]
    assert listed(project)["extra"] == (True, None)
    again = run_cli("trust", "--project", str(project), "--yes")
    assert again.returncode == 0 and "nothing to review" in again.stdout

    # One byte of any file in the folder, not only the manifest.
    tool = folder / "bin" / "tool"
    tool.write_bytes(tool.read_bytes() + b"#")
    assert render(project) == []
    assert listed(project)["extra"] == (False, CHANGED)
    assert run_cli("trust", "--project", str(project), "--yes").returncode == 0
    assert render(project) == ["extra"]

    p = run_cli("revoke", "extra", "--project", str(project))
    assert p.returncode == 0 and "revoked: capability extra" in p.stdout
    assert render(project) == []


def test_trust_refuses_without_a_terminal_and_without_yes(project):
    overlay(project)
    p = run_cli("trust", "--project", str(project), input="y\n")
    assert p.returncode == 1
    assert "not a terminal" in p.stderr and "--yes" in p.stderr
    assert "Traceback" not in p.stderr
    assert render(project) == []
    assert not os.path.exists(store_path())


def test_untrusted_project_hooks_file_is_not_loaded_until_trusted(project):
    hooks = project / ".looprail" / "hooks.json"
    hooks.parent.mkdir(parents=True)
    hooks.write_text(
        json.dumps(
            {"local": {"lint": {"description": "d", "event": "plan:pre", "shell": "exit 0"}}}
        )
    )
    p = run_cli("hooks", "list", "--json", "--project", str(project))
    listing = json.loads(p.stdout)
    assert listing["projectTrusted"] is False
    assert [e["enabled"] for e in listing["entries"]] == ["no (project not trusted)"]

    p = run_cli("trust", "--project", str(project), "--yes")
    assert p.returncode == 0, p.stderr
    assert "/bin/sh -c 'exit 0'" in p.stdout  # the audit showed the shell string
    listing = json.loads(run_cli("hooks", "list", "--json", "--project", str(project)).stdout)
    assert listing["projectTrusted"] is True
    assert [e["enabled"] for e in listing["entries"]] == ["yes"]

    hooks.write_text(hooks.read_text() + "\n")
    listing = json.loads(run_cli("hooks", "list", "--json", "--project", str(project)).stdout)
    assert listing["projectTrusted"] is False
    assert run_cli("revoke", "--hooks", "--project", str(project)).returncode == 0


def test_trust_will_not_consent_to_a_capability_carrying_an_injection(project):
    bad = feature(
        "evil",
        steps=[
            {
                "point": "plan:pre",
                "ref": {"command": "x; touch pwned"},
                "produces": [],
                "consumes": [],
                "onError": "skip",
            }
        ],
    )
    write_capability(project / ".looprail" / "capabilities", bad)
    p = run_cli("trust", "--project", str(project), "--yes")
    assert p.returncode == 1
    assert "$.steps[0].ref.command" in p.stderr and "capability.json" in p.stderr
    assert _stored(project) == {}


def test_trust_will_not_consent_to_a_folder_with_a_symlink_out(project, tmp_path):
    folder = overlay(project)
    (tmp_path / "outside.sh").write_text("echo outside\n")
    (folder / "scripts" / "link.sh").symlink_to(tmp_path / "outside.sh")
    p = run_cli("trust", "--project", str(project), "--yes")
    assert p.returncode == 1
    assert "symlink points outside the capability folder" in p.stderr
    assert listed(project)["extra"][0] is False
    assert "cannot be consented to" in listed(project)["extra"][1]


# --------------------------------------------------------------------------- install


def source_cap(tmp_path, cap_id="lint-cap", **body):
    manifest = feature(cap_id, skills=["lint"], steps=[step("lint")], **body)
    return write_capability(tmp_path / "src", manifest, files={"README.md": "a capability\n"})


def test_install_into_the_project_records_consent(project, tmp_path):
    src = source_cap(tmp_path)
    p = run_cli("capability", "install", str(src), "--project", str(project), "--yes")
    assert p.returncode == 0, p.stderr
    assert "skill gsd-lint" in p.stdout and "consent recorded" in p.stdout
    installed = project / ".looprail" / "capabilities" / "lint-cap"
    assert (installed / "README.md").read_text() == "a capability\n"
    assert render(project) == ["lint-cap"]
    assert not [n for n in os.listdir(installed.parent) if n.startswith(".install-")]


def test_install_refuses_without_a_terminal_and_copies_nothing(project, tmp_path):
    src = source_cap(tmp_path)
    p = run_cli("capability", "install", str(src), "--project", str(project), input="y\n")
    assert p.returncode == 1 and "not a terminal" in p.stderr
    assert "skill gsd-lint" in p.stdout  # the audit still printed
    overlay_dir = project / ".looprail" / "capabilities"
    assert [n for n in os.listdir(overlay_dir)] == []


def test_install_global_needs_no_project_consent(project, tmp_path, _isolated_home):
    src = source_cap(tmp_path)
    p = run_cli("capability", "install", str(src), "--global", "--yes", "--project", str(project))
    assert p.returncode == 0, p.stderr
    assert (_isolated_home / ".looprail" / "capabilities" / "lint-cap").is_dir()
    assert render(project) == ["lint-cap"]


def test_install_refuses_a_second_copy_unless_forced(project, tmp_path):
    src = source_cap(tmp_path)
    args = ("capability", "install", str(src), "--project", str(project), "--yes")
    assert run_cli(*args).returncode == 0
    p = run_cli(*args)
    assert p.returncode == 1 and "already installed" in p.stderr
    (src / "README.md").write_text("v2\n")
    assert run_cli(*args, "--force").returncode == 0
    installed = project / ".looprail" / "capabilities" / "lint-cap"
    assert (installed / "README.md").read_text() == "v2\n"
    assert render(project) == ["lint-cap"]  # consent follows the new content


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {
                "gates": [
                    {
                        "point": "ship:pre",
                        "check": {"query": "q $(id)"},
                        "blocking": True,
                        "onError": "halt",
                    }
                ]
            },
            "$.gates[0].check.query",
        ),
        ({"hooks": [{"event": "Stop", "script": "../../x.sh"}]}, "$.hooks[0].script"),
        ({"tier": "mega"}, "$.tier"),
    ],
)
def test_install_refuses_an_invalid_or_hostile_manifest(project, tmp_path, body, field):
    src = source_cap(tmp_path, **body)
    p = run_cli("capability", "install", str(src), "--project", str(project), "--yes")
    assert p.returncode == 1
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith(f"looprail: error: {src / 'capability.json'}: {field}")
    assert not (project / ".looprail" / "capabilities" / "lint-cap").exists()


def test_install_refuses_an_id_a_first_party_capability_owns(project, tmp_path):
    first_party = tmp_path / "fp"
    write_capability(first_party, feature("lint-cap"))
    src = source_cap(tmp_path)
    p = run_cli(
        "capability", "install", str(src), "--project", str(project), "--yes",
        "--capabilities", str(first_party),
    )  # fmt: skip
    assert p.returncode == 1 and "would never load" in p.stderr


def test_install_refuses_a_symlink_out_of_the_folder(project, tmp_path):
    src = source_cap(tmp_path)
    (tmp_path / "secret").write_text("s")
    (src / "leak").symlink_to(tmp_path / "secret")
    p = run_cli("capability", "install", str(src), "--project", str(project), "--yes")
    assert p.returncode == 1
    assert "symlink points outside the capability folder" in p.stderr
    assert not (project / ".looprail" / "capabilities" / "lint-cap").exists()


class _Terminal:
    """A stdin that says it is a terminal (the answer comes from `input`)."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("answer", "granted"), [("y", True), ("yes", True), ("n", False), ("", False)]
)
def test_trust_asks_on_a_terminal(project, monkeypatch, capsys, answer, granted):
    from looprail.cli import main

    folder = overlay(project)
    questions = []
    monkeypatch.setattr("sys.stdin", _Terminal())
    monkeypatch.setattr("builtins.input", lambda q: questions.append(q) or answer)
    rc = main(["trust", "--project", str(project)])
    assert questions == ["Allow capability extra to run? [y/N] "]
    assert rc == (0 if granted else 1)
    assert (consent_state(project, "extra", folder) is None) is granted
    out = capsys.readouterr().out
    assert ("trusted: capability extra" in out) is granted


def test_a_fifo_in_place_of_the_consent_store_grants_nothing_and_is_never_waited_on(
    tmp_path,
) -> None:
    """Found in review: the store was read with a plain open(), which blocks on a FIFO. Now a
    FIFO (or a device) there reads as an unusable store: no consent, and a grant refuses."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    os.mkfifo(store_path(home))  # nobody writes to it: an open() for reading would hang
    assert consent_state(project, "cap-a", project, home=home) == NO_CONSENT
    with pytest.raises(TrustError, match="consent store"):
        grant(project, {"cap-a": "0" * 64}, home=home)
