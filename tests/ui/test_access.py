"""The dashboard's first write is safe (issue 30, "From the dashboard"): Starlette's TestClient
against the app `looprail ui` serves, one refusal per test. With a token, every read needs it;
the write (`POST /api/answer`) needs it in its form body, the page's own origin, an allowed Host
on the served port, and a small urlencoded body. Nothing of a refused body is echoed."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")
pytest.importorskip("httpx")

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Using `httpx`")
    from starlette.testclient import TestClient

from looprail.ui import access
from looprail.ui.server import create_app

TOKEN = access.new_token()
ORIGIN = {"Origin": "http://testserver"}
FORM = "application/x-www-form-urlencoded"


def _project(root: Path) -> Path:
    (root / ".planning" / "phases" / "01-x").mkdir(parents=True, exist_ok=True)
    return root


def client(root: Path, base_url: str = "http://testserver", **kw) -> TestClient:
    return TestClient(create_app(_project(root), token=TOKEN, **kw), base_url=base_url)


def post(c: TestClient, form: dict | None = None, headers: dict | None = None, **kw):
    body = {"token": TOKEN, "task": "01-01/T2", "answer": "approved"} if form is None else form
    return c.post(
        "/api/answer",
        data=body,
        headers={**ORIGIN, **(headers or {})},
        **kw,
    )


def refused(response, status: int, words: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert words in error and "\n" not in error, error
    return error


# -- the token -----------------------------------------------------------------------------------


def test_every_read_needs_the_token(tmp_path):
    c = client(tmp_path)
    for path in ("/api/state", "/api/events", "/api/chart.svg", "/api/log?run=x&task=y"):
        refused(c.get(path), 403, "needs its token")
        refused(c.get(path, params={"token": TOKEN[:-1] + "x"}), 403, "needs its token")
        refused(c.get(path, headers={"X-Looprail-Token": "nope"}), 403, "needs its token")
    page = c.get("/")
    assert page.status_code == 403 and "needs its token" in page.text
    assert "?token=" in page.text and TOKEN not in page.text
    # with it, in the query or the header
    assert c.get("/api/state", params={"token": TOKEN}).json()["writable"] is True
    assert c.get("/api/state", headers={"X-Looprail-Token": TOKEN}).status_code == 200
    assert c.get("/", params={"token": TOKEN}).status_code == 200
    # the page's own script and style hold no data: they need no token
    assert c.get("/static/app.js").status_code == 200
    assert c.get("/static/app.css").status_code == 200


def test_the_write_without_the_token_is_refused(tmp_path):
    c = client(tmp_path)
    refused(post(c, {"task": "01-01/T2", "answer": "approved"}), 403, "needs its token")
    # a token in the query or a header is not enough: the form carries it
    form = {"task": "01-01/T2", "answer": "approved"}
    refused(post(c, form, params={"token": TOKEN}), 403, "needs its token")
    refused(post(c, form, headers={"X-Looprail-Token": TOKEN}), 403, "needs its token")


def test_the_write_with_a_wrong_token_is_refused(tmp_path):
    c = client(tmp_path)
    for wrong in ("", "x", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), " " + TOKEN):
        form = {"token": wrong, "task": "01-01/T2", "answer": "approved"}
        refused(post(c, form), 403, "needs its token")


def test_the_token_is_compared_in_constant_time(monkeypatch):
    seen = []
    real = access.hmac.compare_digest

    def spy(a, b):
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(access.hmac, "compare_digest", spy)
    assert access.token_matches(TOKEN, TOKEN) is True
    assert access.token_matches(TOKEN, "wrong") is False
    assert seen == [(TOKEN.encode(), TOKEN.encode()), (TOKEN.encode(), b"wrong")]
    assert access.token_matches(TOKEN, None) is False and access.token_matches(TOKEN, "") is False


def test_each_launch_has_its_own_long_token():
    tokens = {access.new_token() for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) >= 43 for t in tokens)
    with pytest.raises(ValueError, match="at least 16"):
        create_app(".", token="short")


def test_without_a_token_the_app_has_no_write_at_all(tmp_path):
    c = TestClient(create_app(_project(tmp_path)))
    assert c.get("/api/state").json()["writable"] is False
    response = c.post("/api/answer", data={"task": "01-01/T2"}, headers=ORIGIN)
    assert response.status_code == 404


# -- method, Host, origin --------------------------------------------------------------------


def test_only_post_reaches_the_write(tmp_path):
    c = client(tmp_path)
    for method in ("GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"):
        response = c.request(method, "/api/answer", params={"token": TOKEN}, headers=ORIGIN)
        assert response.status_code == 405, method
        assert "POST" in response.headers.get("allow", ""), method


def test_a_wrong_host_is_refused(tmp_path):
    c = client(tmp_path, base_url="http://evil.example")
    response = post(c, headers={"Origin": "http://evil.example"})
    assert response.status_code == 400 and "host" in response.text.lower()
    assert c.get("/api/state", params={"token": TOKEN}).status_code == 400
    # a rebinding name with the right port, a bad form, the right name on another port
    c = client(tmp_path)
    for host in ("evil.example:80", "127.0.0.1.evil.example", "localhost:81", "a b", "[::1"):
        response = post(c, headers={"Host": host})
        assert response.status_code == 400, host


def test_the_allowed_forms_of_host(tmp_path):
    c = client(tmp_path, allowed_hosts=["127.0.0.1", "localhost", "[::1]", "testserver"])
    for host in ("localhost", "LOCALHOST:80", "127.0.0.1", "[::1]:80", "testserver"):
        response = c.get("/api/state", params={"token": TOKEN}, headers={"Host": host})
        assert response.status_code == 200, host


def test_a_cross_origin_write_is_refused(tmp_path):
    c = client(tmp_path)
    for origin in (
        "http://evil.example",
        "https://testserver",  # another scheme is another origin
        "http://testserver:81",
        "http://localhost",  # an allowed name, but not the one the page was served as
        "null",  # a sandboxed frame, a data: URL
    ):
        refused(post(c, headers={"Origin": origin}), 403, "refused")


def test_a_write_with_no_origin_or_a_cross_site_referer_is_refused(tmp_path):
    c = client(tmp_path)
    body = {"token": TOKEN, "task": "01-01/T2", "answer": "approved"}
    refused(c.post("/api/answer", data=body), 403, "no Origin or Referer")
    headers = {"Referer": "http://evil.example/page"}
    refused(c.post("/api/answer", data=body, headers=headers), 403, "not this dashboard")
    headers = {**ORIGIN, "Sec-Fetch-Site": "cross-site"}
    refused(c.post("/api/answer", data=body, headers=headers), 403, "cross-site")
    headers = {**ORIGIN, "Sec-Fetch-Site": "same-site"}  # a sibling port or subdomain
    refused(c.post("/api/answer", data=body, headers=headers), 403, "same-site")


# -- the body -------------------------------------------------------------------------------------


def test_an_oversize_body_is_refused_before_it_is_read(tmp_path):
    c = client(tmp_path)
    big = {"token": TOKEN, "task": "01-01/T2", "answer": "x" * (access.MAX_FORM_BYTES + 1)}
    error = refused(post(c, big), 413, "longer than 64 KiB")
    assert "xxxx" not in error

    def chunks():  # no Content-Length: cut off as soon as it passes the limit
        yield f"token={TOKEN}&task=01-01/T2&answer=".encode()
        for _ in range(100):
            yield b"y" * 4096

    response = c.post("/api/answer", content=chunks(), headers={**ORIGIN, "Content-Type": FORM})
    refused(response, 413, "longer than")


def test_only_a_urlencoded_form_is_taken(tmp_path):
    c = client(tmp_path)
    body = {"token": TOKEN, "task": "01-01/T2", "answer": "approved"}
    refused(c.post("/api/answer", json=body, headers=ORIGIN), 415, "urlencoded")
    refused(
        c.post("/api/answer", files={"answer": b"x"}, data=body, headers=ORIGIN), 415, "urlencoded"
    )
    for raw in (b"\xff\xfe=1", b"token=" + TOKEN.encode() + b"&token=" + TOKEN.encode()):
        response = c.post("/api/answer", content=raw, headers={**ORIGIN, "Content-Type": FORM})
        assert response.status_code == 400, raw
    fields = "&".join(f"f{i}=1" for i in range(20))
    response = c.post("/api/answer", content=fields, headers={**ORIGIN, "Content-Type": FORM})
    assert response.status_code == 400


def test_a_write_without_a_task_is_refused(tmp_path):
    c = client(tmp_path)
    for task in ("", "x" * 201, "01-01/T2\n"):
        refused(post(c, {"token": TOKEN, "task": task, "answer": "ok"}), 400, "give the")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
@example(":²")  # a digit to str.isdigit, not to int
@example(":1")  # no host name
def test_split_host_never_takes_a_malformed_host(value):
    parsed = access.split_host(value)
    if parsed is not None:
        name, port = parsed
        assert name and name == name.lower()
        assert not any(c.isspace() or c in "/\\@?#" for c in name)
        assert port is None or 0 < port <= 65535
