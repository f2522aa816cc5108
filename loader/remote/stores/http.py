"""`https://host/path` (or `http://`): a plain web server that answers byte ranges.

One file, a `*.safetensors.index.json`, or a folder (a URL ending in neither): its
`model.safetensors.index.json`, else its `model.safetensors` (HTTP has no listing). Validators
are the server's ETag or Last-Modified; a server with neither is refused unless the load gives a
digest or `unvalidated="allow"` (`loader.remote.source`). Credentials in the URL are refused.
"""

from __future__ import annotations

import urllib.parse

from loader.remote.ranges import TimeLimits
from loader.remote.store import Capability, RemoteURL, Store, StoreKind, refuse
from loader.remote.transport import HTTPTransport


def _parse(scheme: str, rest: str, url: str) -> RemoteURL:
    split = urllib.parse.urlsplit(url)
    if not split.netloc:
        raise refuse(url, f"expected {scheme}://host/path/model.safetensors")
    if split.query or split.fragment:
        raise refuse(url, "a query or fragment is not supported; give the file's plain URL")
    return RemoteURL(scheme, f"{scheme}://{split.netloc}", split.path.strip("/"), store=KIND)


def _show(url: RemoteURL, path: str) -> str:
    return f"{url.root}/{path}"


def _open(url: RemoteURL, limits: TimeLimits) -> Store:
    transport = HTTPTransport(url.root, limits=limits)
    return Store(transport, url)


KIND = StoreKind(
    schemes=("https", "http"),
    form="https://host/path/model.safetensors",
    can=frozenset({Capability.RANGES, Capability.VALIDATORS}),
    parse=_parse,
    show=_show,
    open=_open,
    credentials="serve the file without them",
)
