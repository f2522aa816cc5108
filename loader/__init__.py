"""loadbench's loader: streaming, sharding-aware NNX <-> safetensors save and load.

Public API:
    save_model(model_or_state, path, *, metadata=None, key_map=None, reference=None,
               ignore_unexpected=(), ignore_missing=())   (a key_map: the source layout back)
    load_model(target, path, *, strict=False, key_map=None, ignore_unexpected=(),
               ignore_missing=(), casts="report", strategy=None, options=None)
        -> (model, LoadReport)
    LoadOptions(reading=Reading(...), placement=Placement(...), remote=Remote(...),
                sharing=Sharing(...), checking=Checking(...)): a strategy's own options, by
        role (`loader.options`; load_model's keywords `budget=`, `threads=`, ... build the same)
    plan(target, path, *, key_map=None, ignore_unexpected=(), ignore_missing=(), casts="report",
         options=None) -> PlanTable: the dry run (headers only, no tensor read)
    save_sharded(model, folder) / load_sharded(target, folder, ...)
    convert_to_sharded(src, folder)
    LoadReport, CheckpointError (and its subclasses), strategies (the registry)
    compare_to_transformers(folder, port, inputs): a port against the Hugging Face model, max
        |delta| per output (needs the `ports` extra: torch and transformers)
    Transpose(axes), Reshape(shape), Slice(axis, start, stop): declared key_map transforms
    Stack(keys, axis=0, transform=None): one leaf from N file tensors along a new axis
    Dequantize(weight, scale, block=None), Unpack.compressed_tensors / gptq / awq(prefix),
        DequantizeMXFP4(blocks, scales): one float leaf from a quantized layout's tensors

Importing `loader` (or `loader.format`, `loader.errors`, `loader.sharded.rule`, `loader.strategies`)
does not import jax: the jax-free parts (the header reader, the registry) stay light. The names
above are imported on first use (`loader.strategies` too), and the functions that need jax import
it then.
"""

from typing import TYPE_CHECKING

from loader.errors import CheckpointError, HeaderError, IncompleteCheckpointError, MismatchError
from loader.options import Checking, LoadOptions, Placement, Reading, Remote, Sharing
from loader.report import LoadReport, LoadWarning
from loader.transforms import (
    Dequantize,
    DequantizeMXFP4,
    Reshape,
    Slice,
    Stack,
    Transpose,
    Unpack,
)

if TYPE_CHECKING:  # the lazy names' types, for the type checker; nothing is imported at run time
    from loader import strategies
    from loader.load import load_model
    from loader.planning.dryrun import plan
    from loader.planning.source_check import compare_to_transformers
    from loader.save import save_model
    from loader.sharded.directory import convert_to_sharded, load_sharded, save_sharded

_LAZY = {
    "load_model": "loader.load",
    "plan": "loader.planning.dryrun",
    "save_model": "loader.save",
    "save_sharded": "loader.sharded.directory",
    "load_sharded": "loader.sharded.directory",
    "convert_to_sharded": "loader.sharded.directory",
    "compare_to_transformers": "loader.planning.source_check",
}

__all__ = [
    "CheckpointError",
    "Checking",
    "Dequantize",
    "DequantizeMXFP4",
    "HeaderError",
    "IncompleteCheckpointError",
    "LoadOptions",
    "LoadReport",
    "LoadWarning",
    "MismatchError",
    "Placement",
    "Reading",
    "Remote",
    "Reshape",
    "Sharing",
    "Slice",
    "Stack",
    "Transpose",
    "Unpack",
    "compare_to_transformers",
    "convert_to_sharded",
    "load_model",
    "load_sharded",
    "plan",
    "save_model",
    "save_sharded",
    "strategies",
]


def __getattr__(name: str) -> object:
    import importlib

    if name == "strategies":
        return importlib.import_module("loader.strategies")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'loader' has no attribute {name!r}")
