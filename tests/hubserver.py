"""A tiny fake Hugging Face Hub on 127.0.0.1 for `shapes fetch` tests (never the live Hub).

It answers exactly what huggingface_hub calls for a header fetch:
- `GET /api/models/{org}/{name}[/revision/{rev}]`: model info with `sha` and `siblings`;
- `HEAD|GET /{org}/{name}/resolve/{rev}/{path}`: file metadata (`X-Repo-Commit`, `ETag`,
  `Content-Length`) and bytes, honouring `Range: bytes=a-b` with 206.
Errors carry the `X-Error-Code` header huggingface_hub maps to its exceptions (`RepoNotFound`,
`RevisionNotFound`, `EntryNotFound`, `GatedRepo`). A gated repo answers 401 without a token and
403 with a wrong one. Every request (method, path, Authorization) is logged in `server.requests`.

Example:
    >>> with FakeHub() as hub:
    ...     hub.add_repo("org/model", {"model.safetensors": data})
    ...     os.environ["HF_ENDPOINT"] = hub.url
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?/?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


class _Repo:
    def __init__(self, repo_id: str, files: dict[str, bytes], gated_token: str | None) -> None:
        self.repo_id = repo_id
        self.files = files
        self.gated_token = gated_token
        self.sha = hashlib.sha1(repo_id.encode()).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    server: FakeHubServer

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _error(self, status: int, code: str, message: str = "") -> None:
        body = json.dumps({"error": message or code}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        if message:
            self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _send(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _lookup(self, repo_id: str, rev: str | None) -> _Repo | None:
        repo = self.server.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found")
            return None
        if rev not in (None, "main", repo.sha):
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return repo

    def _route(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        self.server.requests.append((self.command, path, self.headers.get("Authorization")))
        if m := _INFO.match(path):
            rev = urllib.parse.unquote(m["rev"]) if m["rev"] else None
            if (repo := self._lookup(m["repo"], rev)) is not None:
                self._info(repo)
        elif m := _RESOLVE.match(path):
            rev = urllib.parse.unquote(m["rev"])
            if (repo := self._lookup(m["repo"], rev)) is not None:
                self._file(repo, urllib.parse.unquote(m["path"]))
        else:
            self._error(404, "NotFound", f"no route for {path}")

    def _info(self, repo: _Repo) -> None:
        info = {
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": repo.sha,
            "private": False,
            "gated": "auto" if repo.gated_token else False,
            "siblings": [{"rfilename": f} for f in sorted(repo.files)],
        }
        self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})

    def _file(self, repo: _Repo, name: str) -> None:
        if repo.gated_token is not None:
            auth = self.headers.get("Authorization")
            if auth != f"Bearer {repo.gated_token}":
                status = 401 if auth is None else 403
                self._error(status, "GatedRepo", "Access to model is restricted")
                return
        data = repo.files.get(name)
        if data is None:
            self._error(404, "EntryNotFound", f"{name} does not exist")
            return
        headers = {
            "X-Repo-Commit": repo.sha,
            "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
            "Accept-Ranges": "bytes",
            "Content-Type": "application/octet-stream",
        }
        rng = _RANGE.match(self.headers.get("Range", "") or "")
        if rng and self.command == "GET":
            begin = int(rng[1])
            end = min(int(rng[2]) if rng[2] else len(data) - 1, len(data) - 1)
            headers["Content-Range"] = f"bytes {begin}-{end}/{len(data)}"
            self._send(206, data[begin : end + 1], headers)
        else:
            self._send(200, data, headers)

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self._route()

    def do_HEAD(self) -> None:  # noqa: N802 - http.server API
        self._route()


class FakeHubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.repos: dict[str, _Repo] = {}
        self.requests: list[tuple[str, str, str | None]] = []


class FakeHub:
    """Context manager: a `FakeHubServer` on a free port, served from a daemon thread."""

    def __init__(self) -> None:
        self.server = FakeHubServer()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add_repo(
        self, repo_id: str, files: dict[str, bytes], *, gated_token: str | None = None
    ) -> str:
        """Serve `files` (path -> bytes) as repo `repo_id`; returns its commit sha."""
        repo = _Repo(repo_id, files, gated_token)
        self.server.repos[repo_id] = repo
        return repo.sha

    @property
    def requests(self) -> list[tuple[str, str, str | None]]:
        return self.server.requests

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)
