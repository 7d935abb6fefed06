"""`loop render-hooks` memory does not grow with the number of hooks that name one fragment: the
fragment is read once and shared, and the envelope is written piece by piece (never joined, never
copied once per hook). The output stays byte for byte `JSON.stringify(envelope, null, 2)`."""

from __future__ import annotations

import itertools
import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.config import JSText, js_dump, js_dumps
from tests.e2e.test_fail_loud import peak_of
from tests.support import REPO, examples, feature, run_cli, write_capability

EXAMPLE = REPO / "examples" / "hello-loop"
MIB = 1024 * 1024


def _project(tmp_path, name: str, refs: int, size: int):
    project = tmp_path / name
    shutil.copytree(EXAMPLE, project)
    entries = [
        {"point": "plan:pre", "into": "planner", "fragment": {"path": "big.md"},
         "produces": [], "consumes": [], "onError": "skip"}
        for _ in range(refs)
    ]  # fmt: skip
    folder = write_capability(
        project / ".looprail" / "capabilities", feature("hog", contributions=entries)
    )
    # Not only ASCII: the escaped form differs from the text (quotes, newlines, a tab, é, 😀).
    unit = 'line "quoted"\tcol é 😀\n'
    (folder / "big.md").write_text(unit * (size // len(unit.encode())))
    assert run_cli("trust", "--project", str(project), "--yes").returncode == 0
    return project


def test_peak_memory_does_not_grow_with_references_to_one_fragment(tmp_path):
    env = {"LOOPRAIL_CACHE_DIR": str(tmp_path / "cache")}
    peaks = {}
    for refs in (2, 16):  # 16 x 1 MiB = the per-capability budget
        project = _project(tmp_path, f"p{refs}", refs, MIB)
        argv = ("loop", "render-hooks", "plan:pre", "--raw", "--project", str(project))
        peaks[refs], out, _ = peak_of(*argv, env=env)
        envelope = json.loads(out)
        hooks = [h for h in envelope["activeHooks"] if h["capId"] == "hog"]
        assert len(hooks) == refs and envelope["rendered"].count("<contribution") == refs
    # Joined and copied per hook, 14 more references cost ~110 MB (measured 132 vs 24 MB).
    assert peaks[16] - peaks[2] < 8 * 1024, peaks


@pytest.mark.parametrize("raw", [True, False])
def test_streamed_output_is_byte_identical_to_the_joined_envelope(tmp_path, raw):
    from looprail.hooks.resolve import resolve
    from looprail.trust import load_compiled

    project = _project(tmp_path, "p", 3, 200_000)
    args = ["loop", "render-hooks", "plan:pre", "--project", str(project)]
    p = run_cli(*args, *(["--raw"] if raw else []))
    assert p.returncode == 0, p.stderr
    envelope = resolve(load_compiled(project), None, "plan:pre")
    expected = js_dumps(envelope, indent=2) if raw else envelope["rendered"] + "\n"
    assert p.stdout == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(200), deadline=None)
@given(value=json_values, text=st.text(), cuts=st.lists(st.integers(0, 50), max_size=6))
def test_js_dump_streams_what_js_dumps_joins(value, text, cuts):
    big = text * 4000 if text else "x" * 70_000  # above the shared-escape threshold
    whole = {"v": value, "big": [big, big], "text": text}
    bounds = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    streamed = {"v": value, "big": [big, big], "text": JSText(lambda: iter(pieces))}
    for indent in (None, 2):
        written: list[str] = []
        js_dump(streamed, written.append, indent)
        assert "".join(written) == js_dumps(whole, indent)
        assert js_dumps(streamed, indent) == js_dumps(whole, indent)
