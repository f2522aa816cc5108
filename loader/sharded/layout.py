"""Where each slice of each tensor lives: the manifest of a sharded checkpoint directory.

A `Layout` maps every tensor key to its global dtype and shape and to the slices that tile it, each
slice a (file, key in that file, global index range). `read_manifest` parses and checks the
`manifest.json` that `loader.save_sharded` writes last; `file_layout` describes a plain
`.safetensors` checkpoint the same way (one whole-tensor slice per key), so one slice reader serves
both. `LayoutSource` lets `loader.planning.match.plan_load` plan from a layout as it does from file
headers (`open_manifest` and `file_layout_source` make one).

Region geometry lives here too: a region's extents, the overlap of two, a device's index as a
region (`index_region`), a process's distinct regions under a sharding (`local_regions`) and the
box several of them tile (`tiled_box`), which the sharded executor reads in one piece.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.errors import CheckpointError, IncompleteCheckpointError
from loader.format import DTYPES, TensorMeta
from loader.format.source import CheckpointSource
from loader.sharded.files import LocalSliceFile, SliceFile

if TYPE_CHECKING:
    from loader.remote.ranges import RemoteStats

MANIFEST = "manifest.json"
FORMAT = "loadbench.sharded-dir"
FORMAT_VERSION = 1

#: A global index range: one (start, stop) per axis.
Region = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Slice:
    """One stored slice: `key` in `file` holds `region` of its tensor, C-contiguous."""

    file: Path
    key: str
    region: Region


@dataclass(frozen=True)
class TensorLayout(TensorMeta):
    """A tensor (key, global dtype and shape) and the stored slices that tile it."""

    slices: list[Slice] = field(default_factory=list)


@dataclass
class Layout:
    """Every tensor of a checkpoint and where its slices are. `path` is what messages quote."""

    path: Path
    tensors: dict[str, TensorLayout]
    metadata: dict[str, str] = field(default_factory=dict)
    process_count: int = 1


def slice_key(key: str, region: Region) -> str:
    """The key a slice is stored under: `fc.kernel@0:8,0:16` (`step@` for a 0-d tensor)."""
    return key + "@" + ",".join(f"{a}:{b}" for a, b in region)


def full_region(shape: tuple[int, ...]) -> Region:
    return tuple((0, d) for d in shape)


def extents(region: Region) -> tuple[int, ...]:
    return tuple(b - a for a, b in region)


def index_region(index: Any, shape: tuple[int, ...]) -> Region:
    """A device's index (slices, as `Sharding.devices_indices_map` gives it) as a region."""
    index = tuple(index) + (slice(None),) * (len(shape) - len(index))
    return tuple(s.indices(d)[:2] for s, d in zip(index, shape))


def within(region: Region, box: Region) -> tuple[slice, ...]:
    """The index of `region` inside an array holding `box`.

    Example:
        >>> within(((2, 4), (0, 3)), ((2, 6), (0, 3)))
        (slice(0, 2, None), slice(0, 3, None))
    """
    return tuple(slice(a - o, b - o) for (a, b), (o, _) in zip(region, box, strict=True))


def intersect(a: Region, b: Region) -> Region | None:
    """The overlap of two regions of the same tensor, or None if they do not meet."""
    out = tuple((max(x0, y0), min(x1, y1)) for (x0, x1), (y0, y1) in zip(a, b))
    return None if any(lo >= hi for lo, hi in out) else out


def local_regions(sharding: Any, shape: tuple[int, ...]) -> dict[Region, list[Any]]:
    """This process's distinct index ranges of `shape` under `sharding`, and the devices of each."""
    found: dict[Region, list[Any]] = {}
    for device, index in sharding.addressable_devices_indices_map(shape).items():
        found.setdefault(index_region(index, shape), []).append(device)
    return found


def tiled_box(regions: list[Region]) -> Region | None:
    """The box several distinct index ranges of one sharding tile exactly (their bounding box,
    when it holds no more elements than they do), else None.

    Example:
        >>> tiled_box([((0, 4), (0, 2)), ((0, 4), (2, 4))])
        ((0, 4), (0, 4))
        >>> tiled_box([((0, 4), (0, 2)), ((0, 4), (4, 6))]) is None
        True
    """
    if len(regions) < 2:
        return None
    box = tuple((min(a for a, _ in axis), max(b for _, b in axis)) for axis in zip(*regions))
    count = sum(math.prod(extents(r)) for r in regions)
    return box if math.prod(extents(box)) == count else None


def file_layout(source: CheckpointSource) -> Layout:
    """A plain checkpoint (a file or folder of shards) as whole-tensor slices, in file order."""
    tensors = {}
    for key in sorted(source.keys(), key=lambda k: (str(source.file_of(k)), source.file_offset(k))):
        info = source.info(key)
        slices = [Slice(source.file_of(key), key, full_region(info.shape))]
        tensors[key] = TensorLayout(key, info.dtype, info.shape, slices)
    return Layout(source.path, tensors, dict(source.metadata))


def manifest_json(layout: Layout, folder: Path) -> str:
    """The manifest text of `layout` (slice files named relative to `folder`)."""
    tensors = {
        key: {
            "dtype": t.dtype,
            "shape": list(t.shape),
            "slices": [
                {"file": s.file.name, "key": s.key, "index": [list(r) for r in s.region]}
                for s in t.slices
            ],
        }
        for key, t in layout.tensors.items()
    }
    files = sorted({s.file.name for t in layout.tensors.values() for s in t.slices})
    obj = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "process_count": layout.process_count,
        "files": files,
        "metadata": layout.metadata,
        "tensors": tensors,
    }
    return json.dumps(obj, indent=1, sort_keys=True)


def read_manifest(folder: str | Path) -> Layout:
    """Parse and check `folder/manifest.json`.

    Raises:
        IncompleteCheckpointError: the folder has shard files but no manifest (an unfinished save).
        CheckpointError: the manifest is malformed, names a missing file, or its slices do not tile
            a tensor exactly.
    """
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        if not folder.is_dir():
            raise CheckpointError(f"{folder}: no such sharded checkpoint directory")
        raise IncompleteCheckpointError(
            f"{folder}: no {MANIFEST}, so this sharded checkpoint is incomplete "
            "(its writer did not finish: the manifest is written last) "
            "or was not written by loader.save_sharded; "
            "save it again"
        )
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
        if obj.get("format") != FORMAT or obj.get("format_version") != FORMAT_VERSION:
            raise CheckpointError(
                f"{path}: format {obj.get('format')!r} version {obj.get('format_version')!r}; "
                f"expected {FORMAT!r} version {FORMAT_VERSION}"
            )
        files = {name: folder / name for name in obj["files"]}
        tensors = {k: _tensor(path, k, v, files) for k, v in obj["tensors"].items()}
        meta = {str(k): str(v) for k, v in obj.get("metadata", {}).items()}
        layout = Layout(folder, tensors, meta, int(obj["process_count"]))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{path}: not a valid sharded-checkpoint manifest ({e!r})") from None
    missing = [str(f) for f in files.values() if not f.is_file()]
    if missing:
        raise CheckpointError(f"{path}: lists shard file(s) that do not exist: {missing}")
    return layout


def _tensor(
    manifest: Path, key: str, entry: dict[str, Any], files: dict[str, Path]
) -> TensorLayout:
    dtype, shape = entry["dtype"], tuple(int(d) for d in entry["shape"])
    if dtype not in DTYPES or any(d < 0 for d in shape):
        raise CheckpointError(f"{manifest}: tensor {key!r}: bad dtype {dtype!r} or shape {shape}")
    slices = []
    for s in entry["slices"]:
        region = tuple((int(a), int(b)) for a, b in s["index"])
        if len(region) != len(shape) or any(
            not 0 <= a <= b <= d for (a, b), d in zip(region, shape)
        ):
            raise CheckpointError(
                f"{manifest}: tensor {key!r}: slice {s['key']!r} index {region} "
                f"is outside shape {shape}"
            )
        if s["file"] not in files:
            raise CheckpointError(
                f"{manifest}: tensor {key!r}: slice file {s['file']!r} not in 'files'"
            )
        slices.append(Slice(files[s["file"]], str(s["key"]), region))
    _check_tiling(manifest, key, shape, slices)
    return TensorLayout(key, dtype, shape, slices)


def _check_tiling(manifest: Path, key: str, shape: tuple[int, ...], slices: list[Slice]) -> None:
    """The slices cover the tensor exactly once (no gap, no overlap)."""
    total = math.prod(shape)
    covered = sum(math.prod(extents(s.region)) for s in slices)
    overlap = any(
        intersect(s.region, t.region) is not None
        for i, s in enumerate(slices)
        for t in slices[i + 1 :]
    )
    if covered != total or overlap or not slices:
        raise CheckpointError(
            f"{manifest}: tensor {key!r} of shape {shape}: its {len(slices)} slice(s) cover "
            f"{covered} of {total} elements{' with overlaps' if overlap else ''}; "
            "the manifest is damaged"
        )


class LayoutSource:
    """What `plan_load` asks of a source (keys, info, metadata), answered from a layout."""

    #: whether the bytes come over a link, where each read is a request (`share="auto"` weighs
    #: the requests then): False for local files, True for `loader.sharded.remote`'s source
    over_a_link: bool = False

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.path: Path | str = layout.path
        self._order = {key: i for i, key in enumerate(layout.tensors)}

    def keys(self) -> list[str]:
        return list(self.layout.tensors)

    def __contains__(self, key: str) -> bool:
        return key in self.layout.tensors

    def info(self, key: str) -> TensorMeta:
        return self.layout.tensors[key]

    def file_of(self, key: str) -> Path | str:
        return self.path

    def open_file(self, path: Path) -> SliceFile:
        """One of the layout's files, opened for the slice reader (a local file here)."""
        return LocalSliceFile(path)

    def remote_stats(self) -> RemoteStats | None:
        """A remote layout's requests and bytes so far (`loader.sharded.remote`); None here."""
        return None

    def finish_reads(self) -> None:
        """A remote layout's digest checks (`loader.sharded.remote`); nothing here."""
        return None

    def file_offset(self, key: str) -> int:
        return self._order[key]

    @property
    def metadata(self) -> dict[str, str]:
        return self.layout.metadata

    def __enter__(self) -> LayoutSource:
        return self

    def __exit__(self, *exc: object) -> None:
        return None  # a layout holds no open file: the slice reader opens them


def open_manifest(folder: str | Path) -> LayoutSource:
    """The source of a sharded directory: its checked manifest (see `read_manifest`)."""
    return LayoutSource(read_manifest(folder))


def file_layout_source(path: str | Path) -> LayoutSource:
    """The source of a plain checkpoint (file or folder of shards), seen as a layout."""
    with CheckpointSource(path) as source:
        return LayoutSource(file_layout(source))
