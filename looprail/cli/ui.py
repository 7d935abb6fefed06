"""`looprail ui`: serve the dashboard of a project on a local port, behind a per-launch token."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import sys

from looprail.cli._common import add_flavor_option, add_project_options, warn
from looprail.errors import LooprailError, UsageError
from looprail.fsutil import project_folder

DEFAULT_PORT = 8765


def register(sub) -> None:
    p = sub.add_parser(
        "ui",
        help="a local web dashboard of the project's runs, live; answers checkpoints",
        description="Serve a web page of PROJECT: the loop chart with the current run "
        "on it, the points and their hooks, waves → plans → tasks with their logs, past runs, "
        "the command that continues a halted run, and a form that answers a checkpoint the run "
        "waits on. It follows a run going on in another terminal live, reading the journal "
        "read-only; an answer is its only write. The address it prints carries a token made "
        "for this launch: without it the page and its data are refused. Binds to 127.0.0.1 "
        "unless --host says otherwise. Needs the ui extra; without it, this command prints the "
        "one that adds it, as looprail was installed (pipx, uv tool, pip).",
    )
    p.add_argument("project_pos", nargs="?", metavar="PROJECT", help="project folder (default: .)")
    p.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        metavar="N",
        help=f"port to listen on (default: {DEFAULT_PORT}; 0 picks a free one)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="H",
        help="address to bind (default: 127.0.0.1, this machine only)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="one more host name the page answers to (repeatable; besides the loopback names "
        "and this machine's own names); never '*'",
    )
    add_project_options(p)
    add_flavor_option(p)
    p.set_defaults(handler=run)


LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


def _url(bound: str, port: int, token: str | None = None) -> str:
    address = ipaddress.ip_address(bound.split("%", 1)[0])
    shown = bound
    if address.is_unspecified:  # every interface: this machine reaches it on loopback
        shown = "::1" if address.version == 6 else "127.0.0.1"
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def _own_names() -> list[str]:
    """This machine's own names (its host name, its fully qualified name, and the addresses
    they resolve to): what a browser on the network may rightly send as Host."""
    names = {socket.gethostname(), socket.getfqdn()}
    for name in list(names):
        with contextlib.suppress(OSError):
            names.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
    return sorted(n for n in names if n)


def allowed_hosts(bound: str, extra: list[str]) -> tuple[list[str], bool]:
    """`(host names the page answers to, reachable from the network?)`, decided from the
    address the socket actually bound (`0`, `::0` and `""` are every interface, as is
    `0.0.0.0`), never from how `--host` was spelled. Never `*`: any name would let a page on
    another site read the dashboard through DNS rebinding."""
    for name in extra:
        if not name or "*" in name or "/" in name or any(c.isspace() for c in name):
            raise UsageError(f"--allow-host {name!r}: give one host name (never '*')")
    address = ipaddress.ip_address(bound.split("%", 1)[0])
    network = not address.is_loopback
    names = list(LOOPBACK_NAMES)
    if not address.is_unspecified:
        names += [bound, f"[{bound}]"] if ":" in bound else [bound]
    if network:
        names += _own_names()
    names += [n.lower() for n in extra]
    names += [f"[{n}]" for n in names if ":" in n and not n.startswith("[")]  # IPv6 literals
    return list(dict.fromkeys(names)), network


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        raise LooprailError(
            f"cannot listen on {host}:{port} ({why}); give another --port (0 picks a free one)"
        ) from None
    sock.listen(64)
    return sock


def _warn_network(host: str, bound: str, allowed: list[str]) -> None:
    where = "every interface" if bound in ("0.0.0.0", "::") else bound
    warn(
        f"the dashboard is reachable from the network (--host {host!r} listens on {where}); "
        "anyone who has the address it prints (with its token, sent in the clear over plain "
        "HTTP) can read project files and logs and answer checkpoints. Against DNS rebinding "
        "(a web page you open making your browser read it) it answers only to the host names "
        f"{', '.join(allowed)}; add one with --allow-host NAME"
    )


def _require_ui_extra() -> None:
    """A refusal saying how to add the ui extra when it is missing. The extra is optional:
    imported only when `looprail ui` runs, so that without it every other command works."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        from looprail.runtime.extras import install_command

        raise LooprailError(f"looprail ui needs the ui extra: {install_command('ui')}") from None


def run(args) -> int:
    project = project_folder(args.project_pos or args.project)
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a port number (0-65535)")
    _require_ui_extra()
    # the ui extra's own modules (starlette at their tops), known installed now
    import uvicorn

    from looprail.ui.access import new_token
    from looprail.ui.server import create_app, stop_streams

    sock = _listen(args.host, args.port)
    with contextlib.closing(sock):
        bound, port = sock.getsockname()[:2]
        allowed, network = allowed_hosts(bound, args.allow_host)
        if network:
            _warn_network(args.host, bound, allowed)
        token = new_token()
        app = create_app(
            project, args.capabilities, flavor=args.flavor, allowed_hosts=allowed, token=token
        )
        # No access log: a request line carries the token (`?token=` of the page, the event
        # stream and the chart), and nothing of an answer may be written anywhere.
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5, access_log=False
        )

        class Server(uvicorn.Server):
            def handle_exit(self, sig, frame) -> None:
                stop_streams(app)  # open pages get `bye` at once instead of a cut connection
                super().handle_exit(sig, frame)

        # Ctrl-C is how a dashboard is stopped, not an error, even when it comes before the
        # server has taken over the signal (right after the URL is printed).
        with contextlib.suppress(KeyboardInterrupt):
            url = _url(bound, port, token)
            print(f"looprail ui: {project.resolve()} at {url}  (Ctrl-C stops)")
            sys.stdout.flush()
            Server(config).run(sockets=[sock])
    return 0
