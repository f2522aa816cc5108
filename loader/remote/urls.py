"""The remote checkpoint URL forms `load_model` takes, parsed once (these forms are contracts).

- `https://host/path/model.safetensors` (or `http://`): one file, a `*.safetensors.index.json`,
  or a folder (a URL not ending in either): its `model.safetensors.index.json`, else its
  `model.safetensors` (HTTP has no listing).
- `s3://bucket/key`: one object, an index, or a prefix (listed: its index, else every
  `*.safetensors` right under it). The endpoint and credentials come from the usual AWS variables
  (`AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, ...).
- `hf://org/repo[@revision][/file-or-folder]`: a Hugging Face Hub repo at a branch, tag or commit
  (default `main`), through `huggingface_hub` (endpoint `HF_ENDPOINT`, token `HF_TOKEN` or the
  stored login).
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass

from loader.errors import RemoteError

SCHEMES = ("http", "https", "s3", "hf")
INDEX_SUFFIX = ".safetensors.index.json"


def is_url(path: object) -> bool:
    """True for a string of one of the remote forms (`https://`, `http://`, `s3://`, `hf://`)."""
    return isinstance(path, str) and path.split("://", 1)[0] in SCHEMES and "://" in path


@dataclass(frozen=True)
class RemoteURL:
    """A parsed remote checkpoint URL.

    Attributes:
        scheme: `http`, `https`, `s3` or `hf`.
        root: where the store's paths start: `scheme://host` (HTTP), the bucket (S3), the repo
            id `org/name` (Hub).
        path: the file, index or folder within it (`""`: the root itself).
        revision: the Hub revision asked for (None: `main`).
    """

    scheme: str
    root: str
    path: str
    revision: str | None = None

    @property
    def kind(self) -> str:
        """`"file"`, `"index"` or `"folder"`, from the path's ending."""
        if self.path.endswith(INDEX_SUFFIX):
            return "index"
        return "file" if self.path.endswith(".safetensors") else "folder"

    def __str__(self) -> str:
        if self.scheme == "hf":
            rev = f"@{self.revision}" if self.revision else ""
            return f"hf://{self.root}{rev}" + (f"/{self.path}" if self.path else "")
        if self.scheme == "s3":
            return f"s3://{self.root}/{self.path}"
        return f"{self.root}/{self.path}"

    def child(self, path: str) -> str:
        """The URL of another path of the same store (a shard next to an index)."""
        if self.scheme == "hf":
            rev = f"@{self.revision}" if self.revision else ""
            return f"hf://{self.root}{rev}/{path}"
        return f"s3://{self.root}/{path}" if self.scheme == "s3" else f"{self.root}/{path}"


def _refuse(url: str, why: str) -> RemoteError:
    return RemoteError(f"{shown(url)}: {why}")


def shown(url: str) -> str:
    """`url` as it may be printed: any user info (`user:password@`) replaced by `***@`."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if sep and "@" in authority:
        return f"{scheme}://***@{authority.rpartition('@')[2]}{slash}{path}"
    return url


def parse_url(url: str) -> RemoteURL:
    """Parse one of the forms above; `RemoteError` naming the form expected otherwise.

    Example:
        >>> parse_url("hf://org/model@v1/weights").revision
        'v1'
    """
    scheme, _, rest = url.partition("://")
    if scheme not in SCHEMES or not rest:
        raise _refuse(url, f"not a remote checkpoint URL; use one of {', '.join(SCHEMES)}://")
    if shown(url) != url:
        raise _refuse(
            url,
            "credentials in a URL are refused (they end up in logs and reports); serve the "
            "file without them, or use s3:// (AWS_ACCESS_KEY_ID ...) or hf:// (HF_TOKEN)",
        )
    if scheme == "hf":
        parts = rest.strip("/").split("/")
        if len(parts) < 2 or not all(parts[:2]):
            raise _refuse(url, "expected hf://org/repo[@revision][/file-or-folder]")
        name, _, revision = parts[1].partition("@")
        if not name or (_ and not revision):
            raise _refuse(url, "expected hf://org/repo[@revision][/file-or-folder]")
        return RemoteURL("hf", f"{parts[0]}/{name}", "/".join(parts[2:]), revision or None)
    if scheme == "s3":
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise _refuse(url, "expected s3://bucket/key (or s3://bucket/prefix/)")
        return RemoteURL("s3", bucket, key.strip("/"))
    split = urllib.parse.urlsplit(url)
    if not split.netloc:
        raise _refuse(url, f"expected {scheme}://host/path/model.safetensors")
    if split.query or split.fragment:
        raise _refuse(url, "a query or fragment is not supported; give the file's plain URL")
    return RemoteURL(scheme, f"{scheme}://{split.netloc}", split.path.strip("/"))


def s3_endpoint() -> str | None:
    """The S3 endpoint from the usual AWS variables (None: AWS itself)."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
