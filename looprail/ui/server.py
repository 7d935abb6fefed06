"""The dashboard's web app: a Starlette application over `looprail.ui.data` (routes, token, Host
check and Content-Security-Policy: docs/ui.md). GET routes only read; the one write, `POST
/api/answer`, exists only with a token and hands the answer to `machine.answers.submit_answer`.
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from looprail.diagrams import load_envelopes, run_view
from looprail.diagrams.graph import build_graph
from looprail.diagrams.render import render
from looprail.errors import LooprailError
from looprail.journal import EventRow
from looprail.layout import PLANNING_DIR
from looprail.machine.answers import WITHHELD, pending_checkpoints, submit_answer
from looprail.runtime.process import find_program
from looprail.ui import access, data
from looprail.ui.logs import task_log
from looprail.ui.runs import Envelopes

PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
# Graphviz SVG is shown through <img>, where scripts never run; this keeps it inert even when
# opened on its own.
SVG_CSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
STATIC = {"app.js": "text/javascript", "app.css": "text/css"}
NO_TOKEN = (
    "refused: this dashboard needs its token; open the address `looprail ui` printed "
    "(it ends in ?token=…)"
)
ENVELOPE_TTL = 5.0  # seconds a resolved hook set is reused before the manifests are re-read
KEEPALIVE = 15.0
MAX_PAUSE = 5.0  # longest wait between two polls of a big journal


def _asset(name: str) -> str:
    return resources.files("looprail.ui").joinpath("static", name).read_text(encoding="utf-8")


class Dashboard:
    """The project being shown and the caches the routes share."""

    def __init__(
        self,
        project: Path,
        capability_dirs: Sequence[str] = (),
        *,
        poll_interval: float = 0.5,
        flavor: str = "gsd",
    ):
        self.project = project
        self.capability_dirs = [str(d) for d in capability_dirs]
        self.poll_interval = poll_interval
        self.flavor = flavor
        self._lock = threading.Lock()
        # Set when the server is stopping: event streams say goodbye and end, so the server
        # does not wait for them (and the page says it stopped instead of retrying forever).
        self.closing = threading.Event()
        self._envelopes: tuple[float, Envelopes | None, list[str]] | None = None
        self._events: dict[str, list[EventRow]] = {}  # run id → its events so far (append-only)
        self._reading = threading.Lock()  # one snapshot at a time: they share the event cache
        self._svg: tuple[tuple, tuple[bytes, float | None]] | None = None
        self.writable = False  # takes answers to checkpoints (the app has a token)

    def envelopes(self) -> tuple[Envelopes | None, list[str]]:
        """The project's active hooks per point, re-read at most every few seconds; a manifest
        that cannot be loaded is a warning on the page, not a failure."""
        with self._lock:
            cached = self._envelopes
            if cached is not None and time.monotonic() - cached[0] < ENVELOPE_TTL:
                return cached[1], cached[2]
        envelopes: Envelopes | None = None
        warnings: list[str] = []
        if (self.project / PLANNING_DIR).is_dir():
            try:
                envelopes, warnings = load_envelopes(self.project, self.capability_dirs)
            except LooprailError as exc:
                warnings = [f"hooks not shown: {exc}"]
        with self._lock:
            self._envelopes = (time.monotonic(), envelopes, warnings)
        return envelopes, warnings

    def snapshot(self, run: str | None, marker: str | None = None) -> data.Snapshot:
        """The page's data. `version` names the journal state it was read at or after: the
        marker is taken first, so a change that lands while reading shows up as a new marker
        on the next poll and is sent again."""
        marker = marker if marker is not None else data.change_marker(self.project)
        envelopes, warnings = self.envelopes()
        with self._reading:
            snap = data.snapshot(
                self.project,
                self.capability_dirs,
                run,
                envelopes=envelopes,
                envelope_warnings=warnings,
                event_cache=self._events,
            )
        snap["version"] = hashlib.sha256(marker.encode()).hexdigest()[:16]
        snap["writable"] = self.writable
        snap["chart"] = _has_dot()
        snap["chartError"] = None if snap["chart"] else "Graphviz's dot is not installed"
        snap["chartFocus"] = None
        if snap["chart"]:
            try:
                run_id = snap["run"]["id"] if snap["run"] else None
                snap["chartFocus"] = self.chart(run_id)[1]
            except LooprailError as exc:  # the page shows everything else, and why
                snap["chart"], snap["chartError"] = False, str(exc)
        return snap

    def answer(self, task: str, text: str) -> tuple[int, dict[str, object]]:
        """Hand `text` to `machine.answers.submit_answer` (the one place that checks an answer
        and journals it, under the journal's seal) as the dashboard's answer to checkpoint
        `task`: `(HTTP status, what the page shows)`. A refusal is its one line; a secret is
        never echoed back, not even inside a refusal."""
        try:
            secret = any(
                cp.task_id == task.strip() and cp.secret for cp in pending_checkpoints(self.project)
            )
        except LooprailError as exc:
            return 400, {"error": _one_line(str(exc))}
        try:
            done = submit_answer(self.project, task, text, source="dashboard")
        except LooprailError as exc:
            message = _one_line(str(exc))
            if secret and text.strip() and text.strip() in message:
                message = message.replace(text.strip(), WITHHELD)
            return 400, {"error": message}
        except Exception as exc:  # a traceback in the server log could hold the answer
            return 500, {"error": f"the answer could not be recorded ({type(exc).__name__})"}
        withheld = done.withheld or secret
        return 200, {
            "ok": True,
            "runId": done.run_id,
            "task": done.task_id,
            "kind": done.kind,
            "option": done.option,
            "withheld": withheld,
            "recorded": WITHHELD if withheld else (done.option or text.strip()),
            "seq": done.seq,
        }

    def chart(self, run: str | None) -> tuple[bytes, float | None]:
        """The SVG chart of `run` (None: the latest; the default loop when there is no run),
        and where its current state sits across the chart (0..1, for scrolling it into view).
        Cached until the journal or the hooks change."""
        envelopes, _ = self.envelopes()
        marker = data.change_marker(self.project)
        view = None
        journal, _ = data.open_journal(self.project)
        if journal is not None:
            with journal:
                runs = data.looprail_runs(journal.runs(), [])  # a planted run id is never drawn
                selected = data.selected_run(journal, runs, run)
                key = (selected.id if selected else None, marker, id(envelopes))
                with self._lock:
                    if self._svg is not None and self._svg[0] == key:
                        return self._svg[1]
                if selected is not None:
                    view = run_view(journal, selected)
        else:
            key = (None, marker, id(envelopes))
        name = self.project.resolve().name
        graph = build_graph(
            envelopes=envelopes, run=view, title=f"looprail loop · {name}", flavor=self.flavor
        )
        blob = render(graph, "svg")
        focus = _focus(blob, view.state[-1] if view and view.state else None)
        with self._lock:
            self._svg = (key, (blob, focus))
        return blob, focus


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _focus(svg: bytes, node: str | None) -> float | None:
    """The vertical position (0..1) of `node`'s box in a Graphviz SVG, or None: the chart is
    drawn top to bottom, so the page scrolls it down to the state the run is in."""
    if node is None:
        return None

    ns = "{http://www.w3.org/2000/svg}"
    try:
        root = ET.fromstring(svg)
        height = float(root.attrib["viewBox"].split()[3])
        graph = root.find(f"{ns}g")
        transform = graph.get("transform", "") if graph is not None else ""
        shift = re.search(r"translate\((-?[\d.]+)[ ,]+(-?[\d.]+)", transform)
        offset = float(shift.group(2)) if shift else 0.0
    except (ET.ParseError, KeyError, IndexError, ValueError):
        return None
    for group in root.iter(f"{ns}g"):
        title = group.find(f"{ns}title")
        if group.get("class") != "node" or title is None or title.text != node:
            continue
        for shape in group:
            if shape.tag in (f"{ns}polygon", f"{ns}path", f"{ns}ellipse"):
                if shape.tag == f"{ns}ellipse":
                    ys = [float(shape.get("cy", "0"))]
                else:
                    raw = shape.get("points") or shape.get("d") or ""
                    ys = [float(y) for y in re.findall(r"-?[\d.]+,(-?[\d.]+)", raw)]
                if ys and height > 0:
                    return max(0.0, min(1.0, (sum(ys) / len(ys) + offset) / height))
    return None


def _headers(csp: str = PAGE_CSP) -> dict[str, str]:
    return {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def _json(value: object, status: int = 200) -> Response:
    return JSONResponse(value, status_code=status, headers=_headers())


def _run_param(request: Request) -> str | None:
    run = request.query_params.get("run") or None
    return run if run is None or (len(run) <= 64 and run.isalnum()) else None


def stop_streams(app: Starlette) -> None:
    """End every open event stream (call before stopping the server)."""
    app.state.dashboard.closing.set()


Handler = Callable[[Request, Dashboard], Awaitable[Response]]


def _guarded(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """`handler(request, dashboard)`, once the request carries the app's token (when it has
    one); else the locked page (for `/`) or a one-line refusal."""

    async def route(request: Request) -> Response:
        token = request.app.state.token
        if token is not None and not access.token_matches(token, access.request_token(request)):
            if request.url.path == "/":
                return HTMLResponse(_asset("locked.html"), 403, headers=_headers())
            return _json({"error": NO_TOKEN}, 403)
        return await handler(request, request.app.state.dashboard)

    return route


def _text(body: str, status: int) -> Response:
    return Response(body, status, media_type="text/plain", headers=_headers())


async def _page(request: Request, dash: Dashboard) -> Response:
    name = html.escape(dash.project.resolve().name)
    return HTMLResponse(_asset("index.html").replace("{{project}}", name), headers=_headers())


async def _static(request: Request) -> Response:
    # the page's own script and style, the same for every project: no token needed
    name = request.path_params["name"]
    if name not in STATIC:
        return _text("not found\n", 404)
    return Response(_asset(name), media_type=STATIC[name], headers=_headers())


async def _state(request: Request, dash: Dashboard) -> Response:
    return _json(await run_in_threadpool(dash.snapshot, _run_param(request)))


async def _chart(request: Request, dash: Dashboard) -> Response:
    if not _has_dot():
        return _text("the chart needs Graphviz's dot (apt-get install graphviz)\n", 503)
    try:
        blob, _ = await run_in_threadpool(dash.chart, _run_param(request))
    except LooprailError as exc:
        return _text(f"{exc}\n", 503)
    return Response(blob, media_type="image/svg+xml", headers=_headers(SVG_CSP))


async def _log(request: Request, dash: Dashboard) -> Response:
    run = _run_param(request)
    task = request.query_params.get("task", "")
    if not run or not task or len(task) > 512:
        return _json({"error": "give run and task"}, 400)
    return _json(await run_in_threadpool(task_log, dash.project, run, task))


async def _events(request: Request, dash: Dashboard) -> Response:
    headers = {**_headers(), "X-Accel-Buffering": "no"}
    return StreamingResponse(
        _stream(dash, _run_param(request)), media_type="text/event-stream", headers=headers
    )


async def _stream(dash: Dashboard, run: str | None) -> AsyncIterator[str]:
    """The server-sent events of `/api/events`: the snapshot whenever the journal changes."""
    yield "retry: 2000\n\n"
    last = None
    quiet = 0.0
    while not dash.closing.is_set():
        marker = await run_in_threadpool(data.change_marker, dash.project)
        pause = dash.poll_interval
        if marker != last:
            started = time.monotonic()
            snap = await run_in_threadpool(dash.snapshot, run, marker)
            last = marker
            quiet = 0.0
            payload = json.dumps(snap, ensure_ascii=False, separators=(",", ":"))
            yield f"event: state\ndata: {payload}\n\n"
            # A big journal makes a snapshot slow: wait twice as long as it took, so the page
            # never takes more than a third of a core from the run it shows.
            pause = max(pause, min(MAX_PAUSE, 2 * (time.monotonic() - started)))
        elif quiet >= KEEPALIVE:
            quiet = 0.0
            yield ": keep-alive\n\n"
        waited = 0.0
        while waited < pause and not dash.closing.is_set():  # a stop ends the wait
            await asyncio.sleep(min(0.1, pause - waited))
            waited += 0.1
        quiet += pause
    yield "event: bye\ndata: {}\n\n"


async def _favicon(request: Request) -> Response:
    return Response(status_code=204, headers=_headers())


async def _answer(request: Request) -> Response:
    # Order: where it comes from, then how big it is, then the token in its body. Each
    # refusal is one line; nothing of the body is ever logged or echoed.
    why = access.same_origin(request)
    if why is not None:
        return _json({"error": f"refused: {why}; answer from the dashboard's own page"}, 403)
    try:
        form = await access.read_form(request)
    except access._FormError as exc:
        return _json({"error": f"refused: {exc}"}, exc.status)
    if not access.token_matches(request.app.state.token, form.get(access.TOKEN_PARAM)):
        return _json({"error": NO_TOKEN}, 403)
    task = form.get("task", "")
    if not task or len(task) > 200 or not task.isprintable():
        return _json({"error": "refused: give the checkpoint's task (for example 01-02/T2)"}, 400)
    dash = request.app.state.dashboard
    status, body = await run_in_threadpool(dash.answer, task, form.get("answer", ""))
    return _json(body, status)


def create_app(
    project: str | Path,
    capability_dirs: Sequence[str] = (),
    *,
    poll_interval: float = 0.5,
    flavor: str = "gsd",
    allowed_hosts: Sequence[str] = ("127.0.0.1", "localhost", "::1", "[::1]", "testserver"),
    token: str | None = None,
) -> Starlette:
    """The dashboard of `project` as an ASGI app (serve it with uvicorn; test it with
    Starlette's TestClient). `allowed_hosts` are exact names: a pattern (`*`, `*.example`)
    is refused, since it would open the page to DNS rebinding.

    With `token` (`looprail ui` always gives one, `access.new_token()`), every route but the
    static files needs it, and the app takes answers to checkpoints (`POST /api/answer`).
    Without it the app is the read-only dashboard, with no write route at all."""
    if any("*" in name for name in allowed_hosts):
        raise ValueError("allowed_hosts: exact host names only, never a '*' pattern")
    if token is not None and len(token) < 16:
        raise ValueError("token: at least 16 characters (use looprail.ui.access.new_token())")
    dash = Dashboard(Path(project), capability_dirs, poll_interval=poll_interval, flavor=flavor)
    dash.writable = token is not None
    routes = [
        Route("/", _guarded(_page)),
        Route("/favicon.ico", _favicon),
        Route("/static/{name}", _static),
        Route("/api/state", _guarded(_state)),
        Route("/api/events", _guarded(_events)),
        Route("/api/chart.svg", _guarded(_chart)),
        Route("/api/log", _guarded(_log)),
    ]
    if token is not None:
        routes.append(Route("/api/answer", _answer, methods=["POST"]))
    app = Starlette(
        routes=routes,
        middleware=[Middleware(access.HostGuard, allowed_hosts=list(allowed_hosts))],
    )
    app.state.dashboard = dash
    app.state.token = token
    return app


def _has_dot() -> bool:
    """Whether Graphviz's `dot` is on the confined PATH (never found in the project)."""
    return find_program("dot") is not None
