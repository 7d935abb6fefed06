"""The argv each adapter gives its CLI's interactive mode (`run --interactive`'s discuss): the same
settings as the non-interactive call, none of its non-interactive flags, and the prompt as the
CLI's interactive mode reads its first message (`claude -- PROMPT`, `codex … -- PROMPT`,
`opencode --prompt=PROMPT`, `gemini --prompt-interactive=PROMPT`; each CLI's `--help`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from looprail.runtime.agents import ADAPTERS, AgentSettings
from looprail.runtime.base import DispatchContext, build_request
from tests.support import examples

# What makes each CLI non-interactive (its --help): never in the interactive argv.
BATCH_ONLY = {
    "claude": {"-p", "--print", "--output-format", "stream-json", "--verbose"},
    "codex": {"exec", "e", "--json", "--skip-git-repo-check"},
    "opencode": {"run", "--format", "json"},
    "gemini": {"-p", "--output-format", "json"},
}
# How the interactive mode is handed its first message.
PROMPT_FORM = {
    "claude": lambda p: ["--", p],
    "codex": lambda p: ["--", p],
    "opencode": lambda p: [f"--prompt={p}"],
    "gemini": lambda p: [f"--prompt-interactive={p}"],
}


def request(kind: str = "phase"):
    ctx = DispatchContext(project=Path("/p"), phase_number="1", phase_dir=Path("/p/.planning/x"))
    extra = {"role": "orchestrator", "step": "discuss"} if kind == "phase" else {}
    return build_request(kind, "discuss" if kind == "phase" else "mapper", ctx, **extra)


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@pytest.mark.parametrize("git", [True, False])
def test_the_interactive_argv_has_none_of_the_non_interactive_flags(name: str, git: bool) -> None:
    adapter = ADAPTERS[name]()
    prompt = "-starts with a dash\nand spans lines"
    argv = adapter.interactive_argv(prompt, request(), AgentSettings(), git=git)
    assert argv[0] == name
    assert not BATCH_ONLY[name] & set(argv), argv
    assert not any(a.startswith("--prompt=") for a in argv) or name == "opencode"
    # the prompt last, whole, in the form that never reads it as an option
    tail = PROMPT_FORM[name](prompt)
    assert argv[-len(tail) :] == tail, argv
    assert sum(prompt in a for a in argv) == 1


def test_each_cli_is_asked_as_its_help_says() -> None:
    s = AgentSettings()
    argv = {n: ADAPTERS[n]().interactive_argv("P", request(), s, git=True) for n in ADAPTERS}
    assert argv == {
        "claude": ["claude", "--permission-mode", "acceptEdits", "--", "P"],
        "codex": ["codex", "--sandbox", "workspace-write", "--", "P"],
        "opencode": ["opencode", "--prompt=P"],
        "gemini": ["gemini", "--approval-mode", "auto_edit", "--prompt-interactive=P"],
    }


WORDS = st.text(alphabet="abcxyz-_=./", min_size=1, max_size=8)


@settings(max_examples=examples(100), deadline=None)
@given(
    name=st.sampled_from(sorted(ADAPTERS)),
    model=st.none() | WORDS,
    mode=st.none() | st.sampled_from(["default", "plan", "acceptEdits"]),
    tools=st.lists(WORDS, max_size=2),
    sandbox=st.none() | st.sampled_from(["read-only", "workspace-write"]),
    approval=st.none() | st.sampled_from(["default", "plan", "auto_edit"]),
    args=st.lists(WORDS, max_size=3),
    kind=st.sampled_from(["phase", "agent"]),
    git=st.booleans(),
)
@example(  # found in CI: a model named "--" is a setting, not the prompt's separator
    name="claude",
    model="--",
    mode=None,
    tools=[],
    sandbox=None,
    approval=None,
    args=[],
    kind="phase",
    git=False,
)
def test_the_interactive_argv_keeps_every_setting_of_the_non_interactive_one(
    name, model, mode, tools, sandbox, approval, args, kind, git
) -> None:
    """Take the non-interactive flags and the prompt out of the non-interactive argv, and the
    prompt out of the interactive one: what is left is the same (model, permissions, sandbox,
    approval mode, the user's args, in the same order)."""
    args = [a for a in args if a not in BATCH_ONLY[name] and a != "--"]  # "--": refused
    s = AgentSettings(
        model=model,
        permission_mode=mode,
        allowed_tools=tools,
        sandbox=sandbox,
        approval_mode=approval,
        args=args,
    )
    adapter = ADAPTERS[name]()
    prompt = "the prompt"
    batch = adapter.argv(prompt, request(kind), s, git=git)
    talk = adapter.interactive_argv(prompt, request(kind), s, git=git)
    assert not BATCH_ONLY[name] & set(talk) - set(args)
    tail = PROMPT_FORM[name](prompt)
    assert talk[-len(tail) :] == tail
    # "--" right before the prompt is the prompt's form, not a setting (a model may be "--")
    kept = [
        a
        for i, a in enumerate(batch)
        if a not in BATCH_ONLY[name]
        and prompt not in a
        and not (a == "--" and i + 1 < len(batch) and prompt in batch[i + 1])
    ]
    assert talk[: -len(tail)] == kept
