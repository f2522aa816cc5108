"""A spec from local `.safetensors` files, reading their headers only (`shapes inspect`).

A folder is read through its `*.safetensors.index.json` when it has one (its `weight_map` names the
shards and must agree with their headers), else every `*.safetensors` in it, in sorted order.
"""

from __future__ import annotations

import json
from pathlib import Path

from loader.errors import HeaderError
from loader.format import Header, read_header
from shapes.errors import ShapesError
from shapes.spec import ShapeSpec, TensorSpec


def _tensors_of(header: Header, file: str) -> list[TensorSpec]:
    infos = sorted(header.tensors.values(), key=lambda t: (t.begin, t.end, t.name))
    return [TensorSpec(t.name, t.dtype, t.shape, file) for t in infos]


def _read(path: Path) -> Header:
    try:
        return read_header(path)
    except HeaderError as e:
        raise ShapesError(str(e)) from None


def _index_files(index: Path) -> tuple[list[str], dict[str, str]]:
    try:
        obj = json.loads(index.read_text(encoding="utf-8"))
        weight_map = obj["weight_map"]
        if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()
        ):
            raise TypeError("weight_map must map tensor names to file names")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ShapesError(
            f"{index}: not a readable safetensors index with a weight_map ({e})"
        ) from None
    files = sorted(set(weight_map.values()))
    for f in files:
        if Path(f).name != f:
            raise ShapesError(
                f"{index}: shard name {f!r} must be a plain file name in the same folder"
            )
    return files, weight_map


def _folder_files(folder: Path) -> tuple[list[str], dict[str, str] | None, Path | None]:
    indexes = sorted(folder.glob("*.safetensors.index.json"))
    if len(indexes) > 1:
        raise ShapesError(
            f"{folder}: several index files ({', '.join(p.name for p in indexes)}); "
            "pass the one to read instead of the folder"
        )
    if indexes:
        files, weight_map = _index_files(indexes[0])
        return files, weight_map, indexes[0]
    files = sorted(p.name for p in folder.glob("*.safetensors"))
    if not files:
        raise ShapesError(
            f"{folder}: no *.safetensors files and no *.safetensors.index.json in this folder"
        )
    return files, None, None


def _check_weight_map(weight_map: dict[str, str], tensors: list[TensorSpec], index: Path) -> None:
    found = {t.name: t.file for t in tensors}
    for name, file in weight_map.items():
        if found.get(name) != file:
            raise ShapesError(
                f"{index}: weight_map puts {name!r} in {file!r} but the headers have it in "
                f"{found.get(name, 'no file')!r}; regenerate the index or the shards"
            )
    extra = sorted(set(found) - set(weight_map))
    if extra:
        raise ShapesError(
            f"{index}: tensors {extra[:5]} are in the shards but not in the weight_map"
        )


def spec_from_local(path: str | Path) -> ShapeSpec:
    """The spec of a local `.safetensors` file, index json, or folder of shards (headers only)."""
    path = Path(path)
    weight_map: dict[str, str] | None
    index: Path | None
    if path.name.endswith(".index.json"):
        folder, (files, weight_map), index = path.parent, _index_files(path), path
    elif path.is_dir():
        folder = path
        files, weight_map, index = _folder_files(path)
    else:
        folder, files, weight_map, index = path.parent, [path.name], None, None
    tensors: list[TensorSpec] = []
    metadata: dict[str, str] = {}
    seen: dict[str, str] = {}
    for file in files:
        header = _read(folder / file)
        metadata = metadata or header.metadata
        for t in _tensors_of(header, file):
            if t.name in seen:
                raise ShapesError(
                    f"{folder}: tensor {t.name!r} is in both {seen[t.name]} and {file}"
                )
            seen[t.name] = file
            tensors.append(t)
    if weight_map is not None and index is not None:
        _check_weight_map(weight_map, tensors, index)
    return ShapeSpec(
        source=str(path),
        revision=None,
        files=tuple(files),
        tensors=tuple(tensors),
        provenance=f"read from the safetensors headers under {path}",
        metadata=metadata,
    )
