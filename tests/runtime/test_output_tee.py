"""The output tee behind logs and `-v`: however a process's output is cut into chunks and
however its two streams interleave, each stream comes out as the same whole lines, and the
combined log holds every line of each stream in its order."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from looprail.runtime.logs import LINE_CAP, OutputTee, log_of
from tests.support import examples

line = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"."))
stream_text = st.lists(line, max_size=12).map(lambda ls: b"".join(x + b"\n" for x in ls))


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=examples(150), deadline=None)
@given(
    out=stream_text,
    err=stream_text,
    out_cuts=st.lists(st.integers(0, 10_000), max_size=8),
    err_cuts=st.lists(st.integers(0, 10_000), max_size=8),
    order=st.lists(st.booleans(), max_size=40),
    tail=st.binary(max_size=10).map(lambda b: b.replace(b"\n", b"")),
)
def test_lines_survive_any_chunking(tmp_path_factory, out, err, out_cuts, err_cuts, order, tail):
    log = tmp_path_factory.mktemp("tee") / "x.log"
    seen: dict[str, list[str]] = {"stdout": [], "stderr": []}
    tee = OutputTee(combined=log, on_line=lambda s, t: seen[s].append(t), header="# head")
    queues = {"stdout": _chunks(out + tail, out_cuts), "stderr": _chunks(err, err_cuts)}
    picks = iter(order)
    while queues["stdout"] or queues["stderr"]:
        name = "stdout" if next(picks, True) else "stderr"
        if not queues[name]:
            name = "stderr" if name == "stdout" else "stdout"
        tee(name, queues[name].pop(0))
    tee.close("# foot")

    def lines(data: bytes) -> list[str]:
        return [x.decode("utf-8", errors="replace").removesuffix("\r") for x in data.split(b"\n")]

    assert seen["stdout"] == lines(out + tail)[:-1] + ([lines(tail)[0]] if tail else [])
    assert seen["stderr"] == lines(err)[:-1]
    logged = log.read_bytes().split(b"\n")
    assert logged[0] == b"# head" and logged[-2:] == [b"# foot", b""]
    body = logged[1:-2]
    out_lines = (out + tail).split(b"\n")
    out_lines = out_lines if tail else out_lines[:-1]
    err_lines = err.split(b"\n")[:-1]
    assert sorted(body) == sorted(out_lines + err_lines)
    assert [x for x in body if x in out_lines and x not in err_lines] == [
        x for x in out_lines if x not in err_lines
    ]


def test_a_line_without_an_end_is_passed_on_at_the_cap(tmp_path: Path) -> None:
    seen: list[str] = []
    tee = OutputTee(on_line=lambda s, t: seen.append(t))
    tee("stdout", b"x" * (LINE_CAP * 2 + 5))
    assert [len(s) for s in seen] == [LINE_CAP, LINE_CAP]
    tee.close()
    assert [len(s) for s in seen] == [LINE_CAP, LINE_CAP, 5]


def test_a_log_that_cannot_be_written_does_not_stop_the_lines(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    seen: list[str] = []
    tee = OutputTee(combined=blocker / "x.log", on_line=lambda s, t: seen.append(t))
    tee("stdout", b"still shown\n")
    tee.close()
    assert seen == ["still shown"]


def test_log_of_reads_the_last_log_a_reason_names() -> None:
    assert log_of(None) is None and log_of("exited 1") is None
    assert log_of("x exited 3: boom (log: .looprail/logs/R/001-task-01-01-T1.log)") == (
        ".looprail/logs/R/001-task-01-01-T1.log"
    )
    assert log_of("claude: error (transcript: .looprail/logs/R/002-phase-plan)") == (
        ".looprail/logs/R/002-phase-plan"
    )


def test_agent_events_read_into_words() -> None:
    import json

    from looprail.runtime.agents import ClaudeAdapter, CodexAdapter, OpenCodeAdapter

    claude = ClaudeAdapter()
    tool = {"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}
    said = {"type": "assistant", "message": {"content": [tool]}}
    assert claude.show(json.dumps(said)) == '→ Bash {"command": "ls"}'
    result = {"type": "tool_result", "content": "a.txt"}
    assert claude.show(json.dumps({"type": "user", "message": {"content": [result]}})) == "← a.txt"
    run = {"type": "item.started", "item": {"type": "command_execution", "command": "ls"}}
    assert CodexAdapter().show(json.dumps(run)) == "$ ls"
    step = {"type": "step_finish", "part": {"reason": "stop"}}
    assert OpenCodeAdapter().show(json.dumps(step)) is None  # bookkeeping: nothing to show
    assert claude.show("plain words") == "plain words" and claude.show("{cut") == "{cut"
