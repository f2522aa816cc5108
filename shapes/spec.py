"""The shape spec: which tensors a checkpoint holds (name, dtype, shape, file), with no data.

One JSON format, used for the shipped presets, fetched specs and `shapes inspect --out`:

```
{"format_version": 1,
 "source": "openai-community/gpt2",          # Hub repo id, or the local path it was read from
 "revision": "607a30d7...",                    # commit / branch, or null when not pinned
 "files": ["model.safetensors"],               # checkpoint files, in order
 "metadata": {"format": "pt"},                 # optional `__metadata__` written into each file
 "provenance": "how this list was obtained",
 "tensors": [
  {"name": "h.0.attn.bias", "dtype": "F32", "shape": [1, 1, 1024, 1024],
   "file": "model.safetensors"},
  ...]}
```

`tensors` is a list in file-layout order (one object per line keeps committed presets diffable); a
dict `{name: {"dtype", "shape", "file"}}` is also accepted. `file` may be omitted when `files` has
one entry. Dtypes are safetensors names (`F32`, `BF16`, `I64`, `BOOL`, ... see
`loader.format.DTYPES`).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from loader.format import DTYPES, TensorMeta
from shapes.errors import ShapesError

FORMAT_VERSION = 1


@dataclass(frozen=True)
class TensorSpec(TensorMeta):
    """One tensor of a spec: its key in the checkpoint, safetensors dtype and shape, its file."""

    file: str


@dataclass(frozen=True)
class ShapeSpec:
    """The tensors of one checkpoint (no data), plus where the list came from.

    Attributes:
        source: Hub repo id or local path the shapes were read from.
        revision: commit or branch, or None when not pinned.
        files: the checkpoint's file names, in order.
        tensors: every tensor, in file-layout order.
        provenance: free text saying how the list was obtained.
        metadata: the `__metadata__` map written into synthesised files.
        name: the preset or fetched name it was loaded under, if any.
    """

    source: str
    revision: str | None
    files: tuple[str, ...]
    tensors: tuple[TensorSpec, ...]
    provenance: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    name: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _validate(self)

    @cached_property
    def by_name(self) -> dict[str, TensorSpec]:
        return {t.name: t for t in self.tensors}

    def __getitem__(self, name: str) -> TensorSpec:
        try:
            return self.by_name[name]
        except KeyError:
            raise ShapesError(f"spec {self.label}: no tensor named {name!r}") from None

    @property
    def label(self) -> str:
        return self.name or self.source

    @property
    def total_params(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def total_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def bytes_by_dtype(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.dtype] = out.get(t.dtype, 0) + t.nbytes
        return out

    @property
    def largest(self) -> TensorSpec | None:
        return max(self.tensors, key=lambda t: t.numel, default=None)

    @property
    def median_numel(self) -> int | float:
        if not self.tensors:
            return 0
        m = statistics.median(t.numel for t in self.tensors)
        return int(m) if float(m).is_integer() else float(m)

    @property
    def file_count(self) -> int:
        return len(self.files)

    def tensors_in(self, file: str) -> list[TensorSpec]:
        """The tensors stored in `file`, in layout order."""
        return [t for t in self.tensors if t.file == file]

    def to_dict(self) -> dict:
        return {
            "format_version": FORMAT_VERSION,
            "source": self.source,
            "revision": self.revision,
            "files": list(self.files),
            "metadata": dict(self.metadata),
            "provenance": self.provenance,
            "tensors": [
                {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "file": t.file}
                for t in self.tensors
            ],
        }

    def to_json(self) -> str:
        """The spec as JSON text, one tensor per line."""
        head = {k: v for k, v in self.to_dict().items() if k != "tensors"}
        lines = [json.dumps(t, separators=(", ", ": ")) for t in self.to_dict()["tensors"]]
        body = json.dumps(head, indent=1)[:-2]
        return body + ',\n "tensors": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"

    def digest(self) -> str:
        """sha256 of what fixes a synthesised checkpoint's layout (files, metadata, tensors)."""
        d = self.to_dict()
        key = json.dumps([d["files"], d["metadata"], d["tensors"]], separators=(",", ":"))
        return hashlib.sha256(key.encode()).hexdigest()


def _validate(spec: ShapeSpec) -> None:
    where = f"spec {spec.name or spec.source}"
    if len(set(spec.files)) != len(spec.files):
        raise ShapesError(f"{where}: duplicate entries in files {list(spec.files)}")
    for f in spec.files:
        parts = f.replace("\\", "/").split("/")
        if not f.endswith(".safetensors") or f.startswith("/") or ".." in parts or "" in parts:
            raise ShapesError(
                f"{where}: file name {f!r} must be a relative '*.safetensors' path without '..'"
            )
    seen: set[str] = set()
    for t in spec.tensors:
        if t.name in seen or not t.name:
            raise ShapesError(f"{where}: tensor name {t.name!r} is empty or listed twice")
        seen.add(t.name)
        if t.dtype not in DTYPES:
            raise ShapesError(
                f"{where}: tensor {t.name!r} has unknown dtype {t.dtype!r}; "
                f"expected one of {sorted(DTYPES)}"
            )
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in t.shape):
            raise ShapesError(
                f"{where}: tensor {t.name!r} shape {t.shape} must be non-negative integers"
            )
        if t.file not in spec.files:
            raise ShapesError(
                f"{where}: tensor {t.name!r} is in file {t.file!r}, not in files {list(spec.files)}"
            )
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in spec.metadata.items()):
        raise ShapesError(f"{where}: metadata must map strings to strings")


def _tensor_entries(raw: object, files: list[str], where: str) -> list[TensorSpec]:
    if isinstance(raw, Mapping):
        raw = [{"name": k, **v} for k, v in raw.items()]
    if not isinstance(raw, list):
        raise ShapesError(f"{where}: 'tensors' must be a list or an object")
    default_file = files[0] if len(files) == 1 else None
    out = []
    for entry in raw:
        try:
            file = entry.get("file", default_file)
            if file is None:
                raise KeyError("file")
            out.append(TensorSpec(entry["name"], entry["dtype"], tuple(entry["shape"]), file))
        except (KeyError, TypeError, AttributeError) as e:
            raise ShapesError(
                f"{where}: tensor entry {str(entry)[:80]} lacks a valid name/dtype/shape/file ({e})"
            ) from None
    return out


def spec_from_dict(obj: Mapping, *, where: str, name: str | None = None) -> ShapeSpec:
    """Build a `ShapeSpec` from the JSON object of the spec format (see the module docstring)."""
    if not isinstance(obj, Mapping) or "tensors" not in obj:
        raise ShapesError(f"{where}: not a shape spec (a JSON object with a 'tensors' key)")
    version = obj.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise ShapesError(
            f"{where}: format_version {version!r} is not supported (expected {FORMAT_VERSION}); "
            "upgrade loadbench or re-fetch the spec"
        )
    files = list(obj.get("files") or ["model.safetensors"])
    return ShapeSpec(
        source=str(obj.get("source", where)),
        revision=obj.get("revision"),
        files=tuple(files),
        tensors=tuple(_tensor_entries(obj["tensors"], files, where)),
        provenance=str(obj.get("provenance", "")),
        metadata=dict(obj.get("metadata") or {}),
        name=name,
    )


def read_spec_file(path: str | os.PathLike, *, name: str | None = None) -> ShapeSpec:
    """Read a spec JSON file."""
    where = os.fspath(path)
    try:
        with open(where, encoding="utf-8") as fh:
            obj = json.load(fh)
    except OSError as e:
        raise ShapesError(f"{where}: cannot read spec ({e.strerror or e})") from None
    except ValueError as e:
        raise ShapesError(f"{where}: spec is not valid JSON ({e})") from None
    return spec_from_dict(obj, where=where, name=name)
