"""An HTTP proxy on 127.0.0.1 that forwards to a real server and injects one fault on demand.

Tests put it between the loader and nginx, moto's S3 server or the Hub server, so each fault
comes over a real connection from a real server's answer:

- `truncate`: the answer's headers promise the whole range, half the body comes, the
  connection closes;
- `longer`: more bytes than the range asked for (and a Content-Length that says so);
- `status500`: a 500 instead of the answer;
- `reset`: the connection is reset (RST, `SO_LINGER` 0) before any answer;
- `stall`: the answer's headers, then no byte until the proxy closes (`FaultProxy.release`);
- `trickle`: the answer's headers, then one byte every half second;
- `status503`: a 503 with `Retry-After: <Fault.retry_after>`;
- `ignore_range`: the request forwarded without its `Range`: a 200 with the whole file;
- `wrong_range`: the right bytes under a `Content-Range` one byte off;
- `corrupt`: one byte of the body flipped, every header as the server sent it (same ETag).

`strip` (a set of lower-case header names) removes those headers from every answer: a server
without ETag or Last-Modified. `rewrite_host` sends the server its own address as `Host` (a server
that routes by it: fake-gcs-server).

`Fault(kind, nth, times)`: the `nth` range GET (1-based) picks the range to fail; every request
for that range fails, or only the first `times` ones (a transient fault that a retry outlives).
`on_range(n)`, if set, runs before the `n`th range GET is forwarded (kill the server, replace
the object). Every request is logged in `requests` (method, path, Range).
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.link.servers import ServedInThread

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "proxy-connection"}


@dataclass
class Fault:
    kind: str  # truncate | longer | status500 | reset | stall | trickle | status503 | ...
    nth: int = 2
    times: int | None = None  # None: every request for that range
    retry_after: str = "2"  # status503's Retry-After
    range: str | None = None  # set when the nth range GET arrives
    hits: int = 0


class _Handler(BaseHTTPRequestHandler):
    server: _ProxyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _fault_for(self, rng: str | None) -> str | None:
        proxy = self.server.proxy
        with proxy.lock:
            if self.command != "GET" or not rng:
                return None
            proxy.range_gets += 1
            n = proxy.range_gets
            hook = proxy.on_range
            fault = proxy.fault
            if fault is not None and fault.range is None and n == fault.nth:
                fault.range = rng
            hit = (
                fault is not None
                and fault.range == rng
                and (fault.times is None or fault.hits < fault.times)
            )
            if hit and fault is not None:
                fault.hits += 1
        if hook is not None:
            hook(n)
        return fault.kind if hit and fault is not None else None

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        rng = self.headers.get("Range")
        self.server.proxy.requests.append((self.command, self.path, rng))
        self.server.proxy.request_times.append(time.monotonic())
        kind = self._fault_for(rng)
        if kind in ("reset", "status500", "status503"):
            self._answer_alone(kind)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        if self.server.proxy.rewrite_host:
            headers = {k: v for k, v in headers.items() if k.lower() != "host"}
            headers["Host"] = self.server.proxy.upstream.netloc
        if kind == "ignore_range":
            headers = {k: v for k, v in headers.items() if k.lower() != "range"}
        up = self.server.proxy.upstream
        try:
            conn = http.client.HTTPConnection(up.hostname, up.port, timeout=10)
            conn.request(self.command, self.path, body=body, headers=headers)
            answer = conn.getresponse()
            data = answer.read()
            conn.close()
        except OSError:  # the server is gone: so is this connection
            self.close_connection = True
            self.connection.close()
            return
        if kind == "longer":
            data += b"\x00" * 4096
        if kind == "corrupt" and data:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        self._send_headers(kind, answer, len(data))
        if self.command != "HEAD":
            self._send_body(kind, data)

    def _answer_alone(self, kind: str) -> None:
        """A fault the proxy answers without the server: a reset, a 500, a 503."""
        if kind == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        self.send_response(int(kind[-3:]))
        if kind == "status503":
            assert self.server.proxy.fault is not None
            self.send_header("Retry-After", self.server.proxy.fault.retry_after)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send_headers(self, kind: str | None, answer: http.client.HTTPResponse, n: int) -> None:
        self.send_response(answer.status, answer.reason)
        strip = self.server.proxy.strip
        for k, v in answer.getheaders():
            if k.lower() in HOP or k.lower() in strip:
                continue
            if kind == "wrong_range" and k.lower() == "content-range":
                first, _, rest = v[6:].partition("-")
                last, _, total = rest.partition("/")
                v = f"bytes {int(first) + 1}-{int(last) + 1}/{total}"
            self.send_header(k, v)
        self.send_header("Content-Length", str(n))
        self.end_headers()

    def _send_body(self, kind: str | None, data: bytes) -> None:
        if kind in ("stall", "trickle"):
            self.wfile.flush()
            for byte in data if kind == "trickle" else b"":
                if self.server.proxy.released.wait(0.5):
                    break
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            self.server.proxy.released.wait()
            self.close_connection = True
            return
        if kind == "truncate":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward  # noqa: N815 - http.server API


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    proxy: FaultProxy


class FaultProxy(ServedInThread):
    """Context manager: the proxy on a free 127.0.0.1 port in front of `upstream` (a base URL)."""

    server: _ProxyServer

    def __init__(self, upstream: str, *, rewrite_host: bool = False) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.rewrite_host = rewrite_host
        super().__init__(_ProxyServer(("127.0.0.1", 0), _Handler))
        self.server.proxy = self
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.lock = threading.Lock()
        self.fault: Fault | None = None
        self.on_range: Callable[[int], None] | None = None
        self.strip: set[str] = set()  # header names removed from every answer
        self.released = threading.Event()  # set on exit: stalled answers end
        self.range_gets = 0
        self.requests: list[tuple[str, str, str | None]] = []
        self.request_times: list[float] = []  # when each of `requests` arrived (monotonic)

    def __exit__(self, *exc: object) -> None:
        self.released.set()  # stalled and trickling answers end
        super().__exit__(*exc)
