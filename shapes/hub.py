"""`shapes fetch`: a spec from a Hugging Face Hub repo's safetensors headers, without the weights.

Everything goes through `huggingface_hub`: `HfApi.model_info` (pins the revision to a commit and
lists the repo's files), `hf_hub_download` (the shard index only) and
`HfApi.parse_safetensors_file_metadata` (ranged GETs of each header; it re-requests the header
when it is larger than its first 100 kB read). The token comes from huggingface_hub's usual
sources (`HF_TOKEN`, `hf auth login`) and is never written anywhere. huggingface_hub parses the
header JSON itself, so its result is re-encoded and validated again by `loader.format.parse_header`
(known dtypes, non-negative shapes, offsets consistent with shapes and tiling the data).

Which files: `--include GLOB` if given; else `model.safetensors.index.json`, `model.safetensors`,
the one `*.safetensors.index.json`, then every `*.safetensors`, looking at the repo root first and
then anywhere in the repo.
"""

from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import json
import os
import posixpath
import tempfile
from pathlib import Path

from loader.errors import HeaderError
from loader.format import parse_header
from loader.format.atomic import atomic_write_text
from shapes.catalog import PRESETS_DIR, default_name, user_presets_dir
from shapes.errors import FetchError
from shapes.spec import ShapeSpec, TensorSpec

INDEX_SUFFIX = ".safetensors.index.json"


def _pick(files: list[str]) -> list[str]:
    for pool in ([f for f in files if "/" not in f], files):
        for exact in ("model.safetensors.index.json", "model.safetensors"):
            if exact in pool:
                return [exact]
        indexes = [f for f in pool if f.endswith(INDEX_SUFFIX)]
        if len(indexes) == 1:
            return indexes
        weights = sorted(f for f in pool if f.endswith(".safetensors"))
        if weights:
            return weights
    return []


def choose_files(repo_id: str, files: list[str], include: str | None) -> list[str]:
    """The weight files (or one index) to read from a repo's file list."""
    if include:
        chosen = sorted(
            f
            for f in files
            if fnmatch.fnmatch(f, include) and f.endswith((".safetensors", INDEX_SUFFIX))
        )
    else:
        chosen = _pick(files)
    if not chosen:
        listing = ", ".join(sorted(files)[:20]) or "no files"
        raise FetchError(
            f"{repo_id}: no *.safetensors weights{f' matching {include!r}' if include else ''} "
            f"in this repo (it has: {listing}); pick files with --include GLOB"
        )
    indexes = [f for f in chosen if f.endswith(INDEX_SUFFIX)]
    if indexes and len(chosen) > 1:
        raise FetchError(
            f"{repo_id}: --include matched an index and other files {chosen}; narrow it"
        )
    return chosen


def _revalidate(meta, source: str) -> tuple[list[TensorSpec], dict[str, str]]:
    """Re-encode huggingface_hub's parsed header and validate it with our own parser."""
    try:
        obj = {
            name: {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": list(t.data_offsets)}
            for name, t in meta.tensors.items()
        }
        if meta.metadata:
            obj["__metadata__"] = dict(meta.metadata)
        header = parse_header(json.dumps(obj).encode("utf-8"), source=source)
    except (HeaderError, TypeError, ValueError) as e:
        raise FetchError(f"{source}: header rejected: {e}") from None
    infos = sorted(header.tensors.values(), key=lambda t: (t.begin, t.end, t.name))
    return [
        TensorSpec(t.name, t.dtype, t.shape, source.rsplit("/", 1)[-1]) for t in infos
    ], header.metadata


def _shard_list(api, repo_id: str, index_file: str, sha: str) -> list[str]:
    from huggingface_hub import hf_hub_download

    with tempfile.TemporaryDirectory(
        prefix="loadbench-index-"
    ) as cache:  # leave no HF cache behind
        local = hf_hub_download(
            repo_id, index_file, revision=sha, endpoint=api.endpoint, cache_dir=cache
        )
        text = Path(local).read_text(encoding="utf-8")
    try:
        weight_map = json.loads(text)["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise FetchError(
            f"{repo_id}/{index_file}: not a safetensors index with a weight_map ({e})"
        ) from None
    folder = posixpath.dirname(index_file)
    return [posixpath.join(folder, s) if folder else s for s in shards]


def _read_headers(api, repo_id: str, files: list[str], sha: str) -> tuple[list[TensorSpec], dict]:
    tensors: list[TensorSpec] = []
    metadata: dict = {}
    for file in files:
        meta = api.parse_safetensors_file_metadata(repo_id, file, revision=sha)
        found, file_meta = _revalidate(meta, f"{api.endpoint}/{repo_id}/{file}")
        tensors += [TensorSpec(t.name, t.dtype, t.shape, file) for t in found]
        metadata = metadata or file_meta
    return tensors, metadata


def _fetch(repo_id: str, revision: str | None, include: str | None) -> ShapeSpec:
    import huggingface_hub
    from huggingface_hub import HfApi

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)
    info = api.model_info(repo_id, revision=revision)
    sha = info.sha or revision or "main"
    chosen = choose_files(repo_id, [s.rfilename for s in info.siblings or []], include)
    files = (
        _shard_list(api, repo_id, chosen[0], sha) if chosen[0].endswith(INDEX_SUFFIX) else chosen
    )
    tensors, metadata = _read_headers(api, repo_id, files, sha)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return ShapeSpec(
        source=repo_id,
        revision=sha,
        files=tuple(files),
        tensors=tuple(tensors),
        provenance=(
            f"Fetched {when} by `loadbench shapes fetch` "
            f"(huggingface_hub {huggingface_hub.__version__}) "
            f"from the safetensors headers of {', '.join(files)} at {api.endpoint}/{repo_id} "
            f"@ {sha} (requested revision: {revision or 'main'})."
        ),
        metadata=metadata,
    )


def fetch_spec(
    repo_id: str, *, revision: str | None = None, include: str | None = None
) -> ShapeSpec:
    """Read a Hub repo's tensor shapes from its safetensors headers (no weights are downloaded).

    Args:
        repo_id: `"org/name"`.
        revision: branch, tag or commit; the spec records the commit it resolved to.
        include: glob of the weight files to read (default: see the module docstring).

    Raises:
        FetchError: repo/revision/file missing, gated, offline, unreachable, or a malformed header.
    """
    from shapes.hub_errors import translate

    with translate(repo_id, revision):
        return _fetch(repo_id, revision, include)


def fetch_and_save(
    repo_id: str,
    *,
    revision: str | None = None,
    name: str | None = None,
    out: str | os.PathLike | None = None,
    include: str | None = None,
) -> tuple[Path, ShapeSpec]:
    """Fetch a spec and save it (to `out`, else the user presets folder as `name`)."""
    name = name or default_name(repo_id)
    if out is None and (PRESETS_DIR / f"{name}.json").is_file():
        raise FetchError(
            f"{name!r} is the name of a shipped preset; save the fetched spec under another --name"
        )
    if out is None and ("/" in name or "\\" in name or name.startswith(".")):
        raise FetchError(
            f"--name {name!r} must be a plain name (no slashes, not starting with '.')"
        )
    spec = fetch_spec(repo_id, revision=revision, include=include)
    path = Path(out) if out is not None else user_presets_dir() / f"{name}.json"
    atomic_write_text(path, spec.to_json())
    return path, dataclasses.replace(spec, name=name)
