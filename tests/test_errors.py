"""One error tree: every public exception class lives in `looprail/errors.py`, the tree drawn in
its docstring is the real one, control-flow signals are not user errors, and errors carry
their context as attributes."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from looprail import errors
from looprail.errors import (
    CheckpointPause,
    ConfigError,
    InvalidFileError,
    InvalidPointError,
    Issue,
    LooprailError,
    LoopSignal,
    ManifestError,
    StopRequested,
    TransitionRefused,
    json_path,
)
from tests.support.source import modules, nodes

PACKAGE = Path(errors.__file__).resolve().parent


def test_public_exception_classes_are_defined_only_in_errors_py():
    stray = []
    for path in modules():
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in nodes(path):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = {
                b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
            }
            if bases & {"Exception", "ValueError", "LooprailError", "HaltError"} or any(
                b.endswith("Error") for b in bases
            ):
                stray.append(f"{path.relative_to(PACKAGE)}: {node.name}")
    assert stray == []


def test_the_drawn_tree_is_the_real_tree():
    drawn = re.findall(r"^    ([│ ]*)(?:[├└]── )?([A-Z][A-Za-z]+)\b", errors.__doc__, re.M)
    parents: list[str] = []
    seen = []
    for indent, name in drawn:
        depth = len(indent) // 4 + (
            0 if not indent and name in ("LooprailError", "LoopSignal") else 1
        )
        cls = getattr(errors, name)
        parents = parents[:depth]
        if parents:
            assert parents[-1] in [b.__name__ for b in cls.__bases__], (name, parents[-1])
        parents.append(name)
        seen.append(name)
    public = {
        n
        for n, v in vars(errors).items()
        if isinstance(v, type) and issubclass(v, Exception) and v.__module__ == errors.__name__
    }
    assert sorted(seen) == sorted(public)


def test_control_flow_signals_are_not_user_errors():
    for signal in (CheckpointPause, StopRequested):
        assert issubclass(signal, LoopSignal) and not issubclass(signal, LooprailError)
    assert CheckpointPause.exit_code == 3
    assert StopRequested("paused", "interrupt").status == "paused"


def test_invalid_point_is_a_looprail_error_with_its_point():
    with pytest.raises(LooprailError) as caught:
        from looprail.hooks.resolve import check_point

        check_point("plan:during")
    assert isinstance(caught.value, InvalidPointError) and isinstance(caught.value, ValueError)
    assert caught.value.point == "plan:during"
    assert str(caught.value).startswith('Invalid loop point: "plan:during". Valid points: ')


def test_errors_carry_path_field_and_point():
    err = ManifestError([Issue("c/capability.json", "$.gates[0]", "bad"), Issue("f", "$", "x")])
    assert isinstance(err, InvalidFileError)
    assert (err.path, err.field) == ("c/capability.json", "$.gates[0]")
    assert str(err) == "c/capability.json: $.gates[0]: bad (and 1 more problem)"
    cfg = ConfigError(".planning/config.json", "not valid JSON", 3, 4)
    assert (cfg.path, cfg.line, cfg.col) == (".planning/config.json", 3, 4)
    assert str(cfg) == ".planning/config.json:3:4: not valid JSON"

    class Result:
        point, cap_id, message, kind, status, shown = "ship:pre", "g", "m", "gate", "block", "no"

    refused = TransitionRefused(Result())
    assert refused.point == "ship:pre" and str(refused) == "blocked at ship:pre by gate g: no"
    assert LooprailError("plain").path is None


def test_the_pydantic_name_is_not_shadowed():
    assert not hasattr(errors, "ValidationError")


def test_a_timeouts_config_error_names_its_key(tmp_path):
    from looprail.runtime.settings import looprail_settings

    with pytest.raises(ConfigError) as caught:
        looprail_settings({"looprail": {"timeouts": {"agent": "soon"}}})
    assert caught.value.field == "looprail.timeouts.agent"
    assert str(caught.value).startswith(".planning/config.json: looprail.timeouts.agent: ")


_KEYS = st.one_of(
    st.integers(0, 99),
    st.text(max_size=8),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True),
    st.sampled_from(["$schema", "[key]", "é", "a-b", "1a"]),
)


@given(st.lists(_KEYS, max_size=5))
def test_json_path_writes_plain_keys_with_a_dot_and_quotes_the_rest(loc):
    """A key is written `.key` exactly when it is an ASCII identifier (as a JSON path reader
    expects), else `["key"]` (JSON-quoted); indexes are `[n]`, pydantic's `[key]` marker is
    left out."""
    expected = "$"
    for part in loc:
        if isinstance(part, int):
            expected += f"[{part}]"
        elif part == "$schema" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            expected += f".{part}"
        elif part != "[key]":
            expected += f"[{json.dumps(part)}]"
    assert json_path(loc) == expected
