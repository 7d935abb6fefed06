"""One home for layout facts: every layer finds looprail's per-user folder in one place.

With `LOOPRAIL_HOME='~/lr'` the global capabilities, the consent store, the journal key and the
global hooks.json must all live in `$HOME/lr` (once, the capability and consent code used the
literal `~/lr` relative to the working folder while hooks.json used the expanded one).
"""

from __future__ import annotations

import json
from pathlib import Path

from looprail import layout
from looprail.hooks import compiled
from tests.support import feature, run_cli, write_capability
from tests.support.loop import gated_project


def _step(skill: str) -> dict:
    return {
        "point": "plan:pre",
        "ref": {"skill": skill},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }


def test_tilde_looprail_home_is_one_folder_for_every_layer(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    env = {"HOME": str(home), "LOOPRAIL_HOME": "~/lr"}
    lr = home / "lr"
    project, caps = gated_project(tmp_path)

    # capabilities: the global overlay
    src = write_capability(tmp_path / "src", feature("globalcap", skills=["g"], steps=[_step("g")]))
    add = run_cli(
        "capability", "install", str(src), "--global", "--yes", "--project", str(project),
        cwd=cwd, env=env,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    assert (lr / "capabilities" / "globalcap" / "capability.json").is_file()

    # consent: a project capability and the project hooks.json, granted then read back
    write_capability(project / ".looprail" / "capabilities", feature("projcap"))
    hooks = {"local": {"lint": {"description": "lint", "event": "plan:pre", "shell": "true"}}}
    (project / ".looprail" / "hooks.json").write_text(json.dumps(hooks))
    (lr / "hooks.json").write_text(
        json.dumps({"local": {"g": {"description": "g", "event": "plan:pre", "shell": "true"}}})
    )
    trust = run_cli("trust", "--yes", "--project", str(project), cwd=cwd, env=env)
    assert trust.returncode == 0, trust.stderr
    assert (lr / "consent.json").is_file()

    listed = run_cli("capability", "list", "--json", "--project", str(project), cwd=cwd, env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {c["id"]: c for c in json.loads(listed.stdout)["capabilities"]}
    assert rows["globalcap"]["origin"] == "global"
    assert rows["projcap"]["active"] is True  # the consent written above is the one read

    # hooks.json: the global file and the consent for the project file, from the same folder
    native = run_cli("hooks", "list", "--json", "--project", str(project), cwd=cwd, env=env)
    assert native.returncode == 0, native.stderr
    listing = json.loads(native.stdout)
    assert listing["projectTrusted"] is True
    assert [f["file"] for f in listing["files"] if f["scope"] == "global"] == [
        str(lr / "hooks.json")
    ]
    assert [(e["ref"], e["source"], e["enabled"]) for e in listing["entries"]] == [
        ("local/g", "global", "yes"),
        ("local/lint", "project", "yes"),
    ]

    # the journal key
    run = run_cli("run", str(project), "--phase", "1", "--capabilities", str(caps), env=env)
    assert run.returncode == 1, run.stderr  # the ship gate blocks: the run stopped, journaled
    assert (lr / "journal.key").is_file()

    # and nothing anywhere else: no literal `~` folder, no default ~/.looprail
    assert not (cwd / "~").exists() and not (project / "~").exists()
    assert not (home / ".looprail").exists()


def test_looprail_home_expands_against_the_given_environment():
    assert layout.looprail_home({"HOME": "/h", "LOOPRAIL_HOME": "~/lr"}) == "/h/lr"
    assert layout.looprail_home({"HOME": "/h", "LOOPRAIL_HOME": "~"}) == "/h"
    assert layout.looprail_home({"HOME": "/h", "LOOPRAIL_HOME": "/abs"}) == "/abs"
    assert layout.looprail_home({"HOME": "/h"}) == "/h/.looprail"
    assert layout.looprail_home({"HOME": "/h", "LOOPRAIL_HOME": ""}) == "/h/.looprail"
    specs = compiled.root_specs("/p", env={"HOME": "/h", "LOOPRAIL_HOME": "~/lr"})
    assert specs == [
        ("/h/lr/capabilities", "global"),
        ("/h/.gsd/capabilities", "global"),  # GSD's own overlays: `$GSD_HOME`, else HOME
        ("/p/.looprail/capabilities", "project"),
        ("/p/.gsd/capabilities", "project"),
    ]
    specs = compiled.root_specs("/p", env={"HOME": "/h", "GSD_HOME": "/g"})
    assert ("/g/.gsd/capabilities", "global") in specs


def test_hooks_layer_without_a_consent_function_fails_closed(tmp_path):
    """The hooks layer does not import trust: a caller that passes no consent gets every
    project capability inactive, never active by default."""
    project = tmp_path / "project"
    write_capability(project / ".looprail" / "capabilities", feature("p", skills=["s"]))
    raw = compiled.load_compiled(project, [], env={"HOME": str(tmp_path)}, use_cache=False)
    assert raw.capabilities["p"].active is False
    assert raw.capabilities["p"].inactive_reason == compiled.CONSENT_NOT_CHECKED
    seen = []

    def consent(c, home, env):
        seen.append(sorted(c.capabilities))
        return c.replacing({"p": c.capabilities["p"]._replace(consent=True)})

    given = compiled.load_compiled(
        project, [], env={"HOME": str(tmp_path)}, use_cache=False, consent=consent
    )
    assert seen == [["p"]] and given.capabilities["p"].consent is True
    assert given.capabilities["p"].active is True


def test_layout_names_match_the_files_on_disk():
    assert Path(layout.project_path("/p", layout.HOOKS_FILE)) == Path("/p/.looprail/hooks.json")
