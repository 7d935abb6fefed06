"""Live progress: plain lines (every banner, no escape codes) off a terminal and under NO_COLOR;
on a terminal a rich live area with ticking elapsed times and a line per running task, and the
spawning banner once per wave or step."""

from __future__ import annotations

import io
import re
import time

from looprail.machine.progress import Progress, wants_escapes
from looprail.runtime.base import spawn_banner

ESC = re.compile(r"\x1b\[")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_output_keeps_every_banner_and_has_no_escape_codes(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = io.StringIO()
    p = Progress(stream)
    assert not p.live
    for key in ("01-01/T1", "01-02/T1"):
        p.line(spawn_banner(f"executor ({key})"))
        p.task_started(key, key)
        p.status("execute/wave_running · wave 1")
        p.task_finished(key)
        p.line(f"  ✓ {key} 1.0s")
    p.close()
    text = stream.getvalue()
    assert text.count("◆ Spawning executor") == 2
    assert not ESC.search(text)


def test_no_color_and_dumb_terminals_get_plain_lines(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "")
    assert not wants_escapes(Terminal())
    monkeypatch.delenv("NO_COLOR")
    assert wants_escapes(Terminal())
    monkeypatch.setenv("TERM", "dumb")
    assert not wants_escapes(Terminal())
    assert not Progress(Terminal()).live


def test_live_area_ticks_and_shows_each_running_task(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = Terminal()
    p = Progress(stream)
    assert p.live
    p.new_stage()
    p.status("execute/wave_running · wave 1 · 0/2 tasks done")
    p.line(spawn_banner("executor (01-01/T1)"))
    p.task_started("01-01/T1", "01-01/T1 first")
    p.line(spawn_banner("executor (01-02/T1)"))  # same wave: not shown again
    p.task_started("01-02/T1", "01-02/T1 second")
    time.sleep(1.2)  # the area redraws 4 times a second while the agents work
    p.task_finished("01-01/T1")
    p.line("  ✓ 01-01/T1 first 1.2s")
    p.new_stage()  # the next wave gets its banner
    p.line(spawn_banner("executor (01-03/T1)"))
    p.close()
    text = stream.getvalue()
    assert text.count("◆ Spawning executor") == 2
    assert "▹ 01-01/T1 first" in text and "▹ 01-02/T1 second" in text
    ticks = set(re.findall(r"tasks done\s*(?:\x1b\[[0-9;]*m)*\[(\d+(?:\.\d)?m?s)\]", text))
    assert len(ticks) >= 3, ticks  # the elapsed time moved while nothing else happened
    assert "\x1b[32m  ✓ 01-01/T1" in text  # a done task in green


def test_quiet_shows_neither_lines_nor_the_live_area(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = Terminal()
    p = Progress(stream, quiet=True)
    p.status("plan")
    p.task_started("k", "k")
    p.line("hello")
    p.close()
    assert stream.getvalue() == ""
