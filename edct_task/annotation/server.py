"""Serving the annotation app with uvicorn on a socket we bind ourselves.

Binding first lets the command line report a busy port or a bad host as one clear message (not
uvicorn's log line and exit 1), and lets tests and the screenshot script use port 0 (any free
port) and read back the one they got.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator

import uvicorn
from fastapi import FastAPI

__all__ = ["bind", "is_loopback", "serve", "serving"]


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); port 0 picks a free one.

    Raises
    ------
    OSError
        When the address cannot be bound (port in use, unknown host, no permission).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


def _server(app: FastAPI) -> uvicorn.Server:
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config)


def serve(app: FastAPI, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` until interrupted (Ctrl-C)."""
    _server(app).run(sockets=[sock])


@contextlib.contextmanager
def serving(app: FastAPI, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``app`` in a background thread; yields its base URL, stops the server on exit."""
    sock = bind(host, port)
    server = _server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the annotation server stopped while starting")
            threading.Event().wait(0.01)
        bound_host, bound_port = sock.getsockname()[:2]
        yield f"http://{bound_host}:{bound_port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
