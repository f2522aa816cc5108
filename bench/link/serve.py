"""The checkpoint of a `bench run --source http|s3|hf [--link BANDWIDTH]`, served for its children.

`serving(path, source, link, shapes)` starts the server (nginx for `http`; SeaweedFS for `s3`,
the objects uploaded, refused in one line where `weed` is not installed; for `hf`, the
Hub-protocol server of `bench.link.hub` with nginx as its CDN) on 127.0.0.1, or inside a shaped
link's namespace (`--link`), and yields the URL the children load; the S3 endpoint and
credentials, or the Hub's endpoint (and no token), are set in this process's environment (the
children inherit it) for the block and restored after. Everything it started is stopped and
removed on any exit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bench.errors import BenchError
from bench.link import SOURCES
from bench.link.hub import hub_environment, start_hub
from bench.link.servers import (
    BUCKET,
    require_seaweedfs,
    s3_environment,
    start_nginx,
    start_seaweedfs,
    upload,
)
from bench.link.shaping import Link, ShapedLink


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.iterdir() if p.name.endswith((".safetensors", ".index.json")))


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


@contextmanager
def serving(path: str, source: str, link: str | None, shapes: str) -> Iterator[str]:
    """Serve the checkpoint at `path` over `source` (see the module docstring); yield its URL."""
    if source not in SOURCES[1:]:
        raise BenchError(f"--source {source!r}: pick one of {', '.join(SOURCES)}")
    if source == "s3":
        require_seaweedfs()  # before a link is made
    ckpt = Path(path)
    with ExitStack() as stack:
        host, netns = "127.0.0.1", None
        if link is not None:
            shaped = stack.enter_context(ShapedLink(Link.parse(link)))
            host, netns = shaped.server_address, shaped.netns
        if source == "http":
            root = ckpt.parent if ckpt.is_file() else ckpt
            server = stack.enter_context(start_nginx(root, host=host, netns=netns))
            yield f"{server.url}/{ckpt.name}" if ckpt.is_file() else f"{server.url}/"
            return
        if source == "hf":
            yield stack.enter_context(_hub(ckpt, shapes, host, netns))
            return
        server = stack.enter_context(start_seaweedfs(host=host, netns=netns))
        upload(server.url, {f"{shapes}/{p.name}": p for p in _files(ckpt)})
        with s3_environment(server.url):
            yield f"s3://{BUCKET}/{shapes}/{ckpt.name if ckpt.is_file() else ''}"
