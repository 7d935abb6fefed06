"""The point vocabulary is declared once, in `looprail/points.py`: the manifests' `Point` type,
the loop spec, the CLI help and the messages all read it from there."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

from looprail import points
from looprail.hooks import manifest
from looprail.machine.spec import DEFAULT_LOOP
from tests.support import run_cli
from tests.support.source import modules, strings
from tests.support.source import text as source_text

PACKAGE = Path(points.__file__).resolve().parent


def test_point_type_and_tuple_agree():
    assert get_args(manifest.Point) == points.POINTS
    assert (DEFAULT_LOOP.wave_pre, DEFAULT_LOOP.wave_post) == (
        "execute:wave:pre",
        "execute:wave:post",
    )


def test_no_module_but_points_spells_the_vocabulary_out():
    offenders = []
    for path in modules():
        if path.name == "points.py":
            continue
        text = source_text(path)
        # the list written out: the first points in order, in any quoting
        if re.search(r"""["']discuss:pre["'],\s*["']discuss:post["'],\s*["']plan:pre""", text):
            offenders.append(f"{path.relative_to(PACKAGE)}: lists the points")
        for line, value in strings(path):
            if re.search(r"\b(12|twelve) (loop |extension )?points\b", value):
                offenders.append(f"{path.relative_to(PACKAGE)}:{line}: hard-codes the count")
    assert offenders == []


def test_help_and_errors_list_every_point():
    helped = run_cli("loop", "render-hooks", "--help")
    assert helped.returncode == 0
    flat = " ".join(helped.stdout.split())
    assert points.points_text() in flat
    assert f"one of the {len(points.POINTS)} loop points" in flat
    missing = run_cli("loop", "render-hooks")
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith("Valid points: " + points.points_text())
