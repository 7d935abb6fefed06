"""Manifest builders for reviewer lanes: a feature step that supports lanes, and a reviewer
capability with one lane (every field of the lane body, overridable)."""

from __future__ import annotations

from tests.support import feature

POINT = "execute:post"


def review_step(trait=True, cap_id="code-review"):
    entry = {
        "point": POINT,
        "ref": {"skill": "code-review"},
        "produces": [],
        "consumes": [],
        "onError": "skip",
    }
    if trait is not None:
        entry["supportsReviewerLanes"] = trait
    return feature(cap_id, skills=["code-review"], steps=[entry])


def lane_body(slug, binary=None, **extra):
    body = {
        "slug": slug,
        "flags": [f"--{slug}"],
        "transport": "spawn",
        "probe": {"kind": "command-exists", "binary": binary or slug},
        "invoke": {
            "binary": binary or slug,
            "args": ["-p", "-"],
            "promptChannel": "stdin",
            "outputChannel": "stdout",
            "modelArg": None,
            "effortChannel": "none",
        },
        "timeoutFloorMs": 20000,
        "emptyOutput": "stub-with-stderr",
        "reviewsSection": slug,
        "evidenceClass": "source-grounded",
        "requiresBinaries": [],
        "promptBudgetKey": None,
        "modelConfigKey": None,
        "handler": None,
    }
    for key, value in extra.items():
        if key == "invoke":
            body["invoke"] = {**body["invoke"], **value}
        else:
            body[key] = value
    return body


def reviewer_cap(slug, **extra):
    cap_id = f"{slug.replace('_', '-')}-lane"
    manifest = feature(cap_id, role="reviewer", reviewer=lane_body(slug, **extra))
    del manifest["runtimeCompat"]
    return manifest
