"""Who may use the dashboard (docs/ui.md): the per-launch token, the Host check, the same-origin
check and the bounded form body of the one write (`POST /api/answer`). The token is the only
credential, carried as `?token=` or `X-Looprail-Token` by a read and in the form body by the
write; there is no cookie, so a page on another site cannot make the browser send it (CSRF).
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_HEADER = "x-looprail-token"
TOKEN_PARAM = "token"
MAX_FORM_BYTES = 64 * 1024  # an answer is a few lines of text; a list of issues fits easily
MAX_FORM_FIELDS = 8


def new_token() -> str:
    """A fresh secret for one launch of the dashboard (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_matches(expected: str, given: str | None) -> bool:
    """Whether `given` is the token, compared in constant time."""
    if not given:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8", "replace"))


def request_token(request: Request) -> str | None:
    """The token a read carries: the `X-Looprail-Token` header, else `?token=`."""
    return request.headers.get(TOKEN_HEADER) or request.query_params.get(TOKEN_PARAM)


def split_host(value: str) -> tuple[str, int | None] | None:
    """`("name", port or None)` of a Host header (`name`, `name:port`, `[v6]`, `[v6]:port`),
    the name lower-cased; None when it is not one."""
    value = value.strip().lower()
    if not value or any(c.isspace() or c in "/\\@?#" for c in value):
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
    elif value.count(":") > 1:
        return None  # a bare IPv6 literal is not a valid Host
    else:
        name, _, port = value.partition(":")
        rest = f":{port}" if port or value.endswith(":") else ""
    if not name or name == "[]":
        return None  # `:8080` names no host
    if not rest:
        return name, None
    # ASCII digits only: `str.isdigit` also takes `²`, which `int` refuses.
    digits = rest[1:]
    if not rest.startswith(":") or not (digits.isascii() and digits.isdigit()) or len(rest) > 6:
        return None
    port_number = int(rest[1:])
    return (name, port_number) if 0 < port_number <= 65535 else None


class HostGuard:
    """Answer only to the host names the dashboard was bound to, on the port it listens on.

    A page on another site that re-points its own name at 127.0.0.1 (DNS rebinding) sends its
    own name as Host and gets 400. A Host with a port must name the port the request came in
    on (ASGI's `server`); one without a port is taken as it comes (browsers always send the
    port unless it is 80; scripts often leave it out)."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str]):
        self.app = app
        self.allowed = frozenset(h.lower() for h in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host", "")
        if not self.host_ok(host, scope.get("server")):
            headers = {"cache-control": "no-store", "x-content-type-options": "nosniff"}
            await PlainTextResponse("Invalid host header\n", 400, headers)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def host_ok(self, host: str, server: tuple[str, int | None] | None) -> bool:
        parsed = split_host(host)
        if parsed is None or parsed[0] not in self.allowed:
            return False
        port = parsed[1]
        served = server[1] if server else None
        return port is None or served is None or port == served


def same_origin(request: Request) -> str | None:
    """Why `request` is not from the dashboard's own page, or None when it is.

    The served origin is `http://` + the Host header (already checked by `HostGuard`).
    Browsers send `Origin` on every POST; without it, `Referer` must name the same origin (the
    page sends no Referer, `Referrer-Policy: no-referrer`, so in practice Origin decides).
    A request with neither is refused: the write is for the page, and `looprail answer` is
    the command line's way. `Sec-Fetch-Site`, when the browser sends it, must say
    `same-origin`."""
    host = request.headers.get("host", "")
    served = split_host(host)
    if served is None:
        return "no valid Host"
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"a {site} request"
    origin = request.headers.get("origin")
    if origin is None:
        referer = request.headers.get("referer")
        if not referer:
            return "no Origin or Referer header"
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}"
    if origin == "null":
        return "an opaque origin (null)"
    parts = urlsplit(origin)
    theirs = split_host(parts.netloc) if parts.scheme == "http" else None
    if theirs is None or theirs != served:
        return f"origin {origin[:100]!r} is not this dashboard"
    return None


class _FormError(Exception):
    """A write whose body cannot be taken: `status` and a one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


async def read_form(request: Request, limit: int = MAX_FORM_BYTES) -> dict[str, str]:
    """The urlencoded form of a POST, read to at most `limit` bytes (a longer body is refused
    before it is read, by its Content-Length, or as soon as it passes the limit)."""
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise _FormError(415, "send the answer as application/x-www-form-urlencoded")
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise _FormError(400, "a Content-Length that is not a number")
        if int(declared) > limit:
            raise _FormError(413, f"the answer is longer than {limit // 1024} KiB")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _FormError(413, f"the answer is longer than {limit // 1024} KiB")
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(
            text,
            keep_blank_values=True,
            strict_parsing=bool(text),
            max_num_fields=MAX_FORM_FIELDS,
        )
    except (UnicodeDecodeError, ValueError):
        raise _FormError(400, "a form body that is not urlencoded UTF-8") from None
    form: dict[str, str] = {}
    for key, value in pairs:
        if key in form:
            raise _FormError(400, f"the field {key!r} is given twice")
        form[key] = value
    return form
