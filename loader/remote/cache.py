"""`cache_dir=`: a remote checkpoint's files downloaded once, then read from the local disk.

The folder for one checkpoint is named by a hash of its URL and every file's validators (ETag,
Last-Modified) and known sha256, so a file replaced upstream gets a new folder (the old one is
left for the user to delete). Each file is fetched with the same checked range requests as a
streaming load (`concurrency` chunks at a time, each written at its offset), into a temporary name
that is renamed only when complete and, where a digest is known, only once its sha256 matched: a
killed or mixed download leaves no file that looks finished, so a bad copy is never reused. A
file that nothing can check (no validator, no digest) is not cached at all. This is also the
"download, then load" reference.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import posixpath
from pathlib import Path

import numpy as np

from loader.errors import RemoteError
from loader.remote.source import RemoteSource


def _folder(source: RemoteSource, cache_dir: Path) -> Path:
    key = source.path + "".join(
        f"\n{o.path} {o.etag} {o.last_modified} {o.sha256} {o.size}"
        for o in source.objects.values()
    )
    return cache_dir / hashlib.sha256(key.encode()).hexdigest()[:24]


def _download(source: RemoteSource, path: str, dest: Path) -> None:
    obj = source.objects[path]
    tmp = dest.with_name(f".{dest.name}.part-{os.getpid()}")
    step = source.reader.chunk_bytes
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, obj.size)

        def one(start: int) -> None:
            out = np.empty(min(step, obj.size - start), np.uint8)
            source.reader.fetch(obj, start, out, what=f"download of {posixpath.basename(path)}")
            os.pwrite(fd, out.data, start)

        with concurrent.futures.ThreadPoolExecutor(source.concurrency) as pool:
            list(pool.map(one, range(0, obj.size, step)))
        source.finish_reads()  # the sha256, where known, before the copy is kept
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, dest)


def cached_copy(source: RemoteSource, cache_dir: str | os.PathLike[str]) -> Path:
    """The local copy of `source`'s files (downloaded now unless cached): a file or a folder."""
    unchecked = [o.url for o in source.objects.values() if o.validator == "none" and not o.sha256]
    if unchecked:
        raise RemoteError(
            f"{unchecked[0]}: no ETag, Last-Modified or digest to key a cached copy by, so a "
            "changed file would be reused; give digest='sha256:...' or load without cache_dir="
        )
    folder = _folder(source, Path(cache_dir))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise RemoteError(
            f"cache_dir={os.fspath(cache_dir)}: cannot create ({e.strerror})"
        ) from None
    names = [posixpath.basename(p) for p in source.objects]
    if len(set(names)) != len(names):
        raise RemoteError(
            f"{source.path}: shard files share a name; cannot cache them in one folder"
        )
    for path, name in zip(source.objects, names):
        dest = folder / name
        if not (dest.is_file() and dest.stat().st_size == source.objects[path].size):
            _download(source, path, dest)
    return folder / names[0] if len(names) == 1 else folder
