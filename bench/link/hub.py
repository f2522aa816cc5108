"""A Hub-protocol server: what huggingface_hub and `hf://` loads ask of huggingface.co, answered
on an address this run owns (127.0.0.1, or inside a shaped link's namespace). Never the live Hub.

It answers what `HfApi.model_info`, `get_hf_file_metadata` and the loader's range reads request:
- `GET /api/models/{org}/{name}[/revision/{rev}]`: the model info (`sha`, the commit every
  revision resolves to; `siblings`, the files);
- `HEAD|GET /{org}/{name}/resolve/{rev}/{path}`: a file's metadata headers (`X-Repo-Commit`,
  `ETag`) and its bytes, `Range: bytes=a-b` answered with 206.
Errors carry the `X-Error-Code` huggingface_hub maps to its exceptions (`RepoNotFound`,
`RevisionNotFound`, `EntryNotFound`, `GatedRepo`); a gated repo answers 401 without a token and
403 with a wrong one.

Bytes go where the real Hub sends them. A repo given a CDN (`cdn=`, a server holding the repo's
files under the same paths: nginx, which serves ranges with sendfile) answers a `*.safetensors`
file's resolve as the Hub answers an LFS file: a 302 to the CDN carrying the metadata
(`X-Linked-Etag`, `X-Linked-Size`, `X-Repo-Commit`); small files (an index) it serves itself.
huggingface_hub reads the metadata off the 302 and follows no redirect to another host; obstore
follows it, sending `Range` and `If-Match` on but not `Authorization` (another origin), so the
ETag a load checks across its ranges is the CDN's. So a bench load meets what it meets on the
real Hub (a 302 per range request, then the CDN), and the bytes cost the server nginx's CPU per
byte rather than Python's (about twice nginx's, docs/results.md: CPU a 10 Gbit load's client
needs on a small host). A repo without a CDN (the tests' repos of bytes) serves every file itself.

`InProcessHub` runs one in a thread of this process (the tests: every request logged);
`start_hub` runs one as a child process (the bench: a checkpoint's files, `python -m
bench.link.hub`), in a namespace if asked, stopped by `Server.stop` on any exit. `hub_environment`
points huggingface_hub at it for this process's children with no token of the user's.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.link.servers import ServedInThread, Server, _prefix, environment, free_port

_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?/?$")
_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")
LFS_SUFFIX = ".safetensors"  # files the Hub keeps in LFS: their resolve redirects to the CDN
NETNS_PORT = 8000  # the port inside a namespace of the run's own (nginx has 8080, moto 5000)
#: Where huggingface_hub finds a token (or which Hub it asks): cleared for the children, so
#: no token of the user's is ever sent to the bench's server (`hub_environment`).
CLEARED_VARIABLES = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "HF_OIDC_RESOURCE",
    "HF_OIDC_ID_TOKEN",
    "HUGGINGFACE_CO_STAGING",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
)


@dataclass
class HubRepo:
    """A repo: its files (path in the repo -> bytes, or a local file), its commit and access.

    Attributes:
        repo_id: `org/name`.
        files: each file's bytes (served from memory) or local path (served from disk).
        gated_token: the one token that may read the files (None: public).
        cdn: the base URL the `*.safetensors` files are redirected to (None: served here).
        sha: the commit every revision of it resolves to, fixed when the repo is made (a file
            replaced later keeps it: the ETag is what changes).
    """

    repo_id: str
    files: dict[str, bytes | Path]
    gated_token: str | None = None
    cdn: str | None = None
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        local = [f"{n}:{_etag(f)}" for n, f in sorted(self.files.items()) if isinstance(f, Path)]
        self.sha = hashlib.sha1("\n".join([self.repo_id, *local]).encode()).hexdigest()


def _etag(entry: bytes | Path) -> str:
    """Bytes: their sha256 (the Hub's LFS id). A local file: its size and mtime, as nginx's ETag
    is (hashing a 2 GB checkpoint would cost seconds at every start); each changes with the file."""
    if isinstance(entry, bytes):
        return f'"{hashlib.sha256(entry).hexdigest()}"'
    st = entry.stat()
    return f'"{st.st_size:x}-{st.st_mtime_ns:x}"'


def _size(entry: bytes | Path) -> int:
    return len(entry) if isinstance(entry, bytes) else entry.stat().st_size


def _slice(entry: bytes | Path, begin: int, end: int) -> bytes:
    """Bytes `[begin, end)` of the entry."""
    if isinstance(entry, bytes):
        return entry[begin:end]
    with open(entry, "rb") as f:
        f.seek(begin)
        return f.read(end - begin)


class _Handler(BaseHTTPRequestHandler):
    server: HubServer
    protocol_version = "HTTP/1.1"  # keep-alive: a load's many resolves reuse their connections

    def log_message(self, *args: object) -> None:  # requests are kept in `server.requests`
        pass

    def _send(
        self, status: int, body: bytes, headers: dict[str, str], length: int | None = None
    ) -> None:
        """The answer; a HEAD's has no body, and `length` (the file's) if given."""
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str, message: str = "") -> None:
        body = json.dumps({"error": message or code}).encode()
        headers = {"X-Error-Code": code, "Content-Type": "application/json"}
        if message:
            headers["X-Error-Message"] = message
        self._send(status, body, headers)

    def _lookup(self, repo_id: str, rev: str | None) -> HubRepo | None:
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

    def _info(self, repo: HubRepo) -> None:
        info = {
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": repo.sha,
            "private": False,
            "gated": "auto" if repo.gated_token else False,
            "siblings": [{"rfilename": f} for f in sorted(repo.files)],
        }
        self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"})

    def _file(self, repo: HubRepo, name: str) -> None:
        if repo.gated_token is not None:
            auth = self.headers.get("Authorization")
            if auth != f"Bearer {repo.gated_token}":
                status = 401 if auth is None else 403
                self._error(status, "GatedRepo", "Access to model is restricted")
                return
        entry = repo.files.get(name)
        if entry is None:
            self._error(404, "EntryNotFound", f"{name} does not exist")
            return
        size, etag = _size(entry), _etag(entry)
        headers = {"X-Repo-Commit": repo.sha, "ETag": etag}
        if repo.cdn is not None and name.endswith(LFS_SUFFIX):
            location = f"{repo.cdn}/{urllib.parse.quote(name)}"
            headers |= {"X-Linked-Etag": etag, "X-Linked-Size": str(size), "Location": location}
            self._send(302, b"", headers)
            return
        headers |= {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        rng = _RANGE.match(self.headers.get("Range", "") or "")
        if rng and self.command == "GET":
            begin = int(rng[1])
            if begin >= size:
                self._send(416, b"", {**headers, "Content-Range": f"bytes */{size}"})
                return
            end = min(int(rng[2]) if rng[2] else size - 1, size - 1)
            headers["Content-Range"] = f"bytes {begin}-{end}/{size}"
            self._send(206, _slice(entry, begin, end + 1), headers)
        elif self.command == "HEAD":
            self._send(200, b"", headers, length=size)
        else:
            self._send(200, _slice(entry, 0, size), headers)

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self._route()

    def do_HEAD(self) -> None:  # noqa: N802 - http.server API
        self._route()


class HubServer(ThreadingHTTPServer):
    """The server: its repos (`add_repo`) and every request as (method, path, Authorization)."""

    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.repos: dict[str, HubRepo] = {}
        self.requests: list[tuple[str, str, str | None]] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes | Path],
        *,
        gated_token: str | None = None,
        cdn: str | None = None,
    ) -> str:
        """Serve `files` (path in the repo -> bytes or local file) as `repo_id`; its commit."""
        repo = HubRepo(repo_id, files, gated_token, cdn)
        self.repos[repo_id] = repo
        return repo.sha


class InProcessHub(ServedInThread):
    """A `HubServer` on a free port of 127.0.0.1, served from a daemon thread of this process.

    Example:
        >>> with InProcessHub() as hub:
        ...     hub.add_repo("org/model", {"model.safetensors": data})
        ...     os.environ["HF_ENDPOINT"] = hub.url
    """

    server: HubServer

    def __init__(self) -> None:
        super().__init__(HubServer())
        self.url = self.server.url
        self.add_repo = self.server.add_repo

    @property
    def requests(self) -> list[tuple[str, str, str | None]]:
        return self.server.requests


def start_hub(
    repo_id: str, files: list[Path], cdn: str, *, host: str = "127.0.0.1", netns: str | None = None
) -> Server:
    """A Hub-protocol server child process serving `files` as `repo_id` on `host`, their bytes
    redirected to `cdn` (a server holding them under their names: `start_nginx` of their folder).

    Example:
        >>> with start_nginx(folder) as cdn, start_hub("org/m", files, cdn.url) as hub:
        ...     os.environ["HF_ENDPOINT"] = hub.url
    """
    workdir = Path(tempfile.mkdtemp(prefix="loadbench-hub-"))
    port = free_port() if netns is None else NETNS_PORT
    argv = [sys.executable, "-m", "bench.link.hub", "--host", host, "--port", str(port)]
    argv += ["--repo", repo_id, "--cdn", cdn, *(str(p.resolve()) for p in files)]
    log = open(workdir / "stdout.log", "wb")  # noqa: SIM115 - the child holds it
    process = subprocess.Popen(
        [*_prefix(netns), *argv], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    server = Server(f"http://{host}:{port}", process, workdir)
    return server.listening(host, port, "the Hub-protocol server")


@contextlib.contextmanager
def hub_environment(endpoint: str) -> Iterator[None]:
    """For the block, this process (and the children it starts) ask the Hub at `endpoint` with
    no token: the token variables cleared, `HF_HOME` (where a stored login lives) a fresh empty
    folder, removed after; the environment is restored on any exit."""
    with tempfile.TemporaryDirectory(prefix="loadbench-hf-home-") as home:
        values: dict[str, str | None] = dict.fromkeys(CLEARED_VARIABLES)
        values |= {
            "HF_ENDPOINT": endpoint,
            "HF_HOME": home,
            "HF_TOKEN_PATH": str(Path(home) / "token"),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_UPDATE_CHECK": "1",
        }
        with environment(values):
            yield


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.link.hub --host H --port P --repo ORG/NAME --cdn URL FILE...`: serve
    until terminated (the bench's child; `start_hub` builds this command)."""
    parser = argparse.ArgumentParser(prog="python -m bench.link.hub", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--repo", required=True, help="the repo id, org/name")
    parser.add_argument("--cdn", required=True, help="base URL the *.safetensors redirect to")
    parser.add_argument("files", nargs="+", type=Path, help="the repo's files (their names)")
    args = parser.parse_args(argv)
    server = HubServer(args.host, args.port)
    server.add_repo(args.repo, {p.name: p for p in args.files}, cdn=args.cdn.rstrip("/"))
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
