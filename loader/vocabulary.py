"""The loader's words, said once: phase names, strategy kinds, checkpoint forms, options, verdicts.

`loader`, `bench` and `dashboard` import these rather than spelling them (the bench's own words,
such as how a measured child ended, are `bench.vocabulary`'s). This module imports
nothing (no jax, no numpy), so the dashboard and the bench runner can use it freely.
"""

from __future__ import annotations

from typing import Final

# -- phases: what a strategy wraps its work in (`probe.phase(NAME)`) -------------------------------
DOWNLOAD: Final = "download"  # a remote checkpoint fetched whole to a local disk (`download`)
BUILD: Final = "build"  # construct the target: a random init, or an abstract (shape-only) build
READ: Final = "read"  # bytes from the file into host memory
CAST: Final = "cast"  # dtype conversion
TRANSFER: Final = "transfer"  # host -> device placement (jax.device_put / make_array_*)
DEQUANTIZE: Final = "dequantize"  # a quantized weight and its scales made the model's float leaf
ASSEMBLE: Final = "assemble"  # put the arrays into the model (nnx.update / merge)
STREAM: Final = "stream"  # read + cast + transfer interleaved per tensor
COMPILE: Final = "compile"  # lower + compile the model's forward (`bench run --compile`)
PHASES: Final = (DOWNLOAD, BUILD, READ, CAST, TRANSFER, DEQUANTIZE, ASSEMBLE, STREAM, COMPILE)
TOTAL: Final = "total"  # the row that spans a whole load (not a phase a strategy enters)
PHASE_ORDER: Final = (*PHASES, TOTAL)

# -- strategy kinds: what a registered strategy is -------------------------------------------------
STRATEGY: Final = "strategy"  # one of ours: loads a model
REFERENCE: Final = "reference"  # a reference line (`floor`): reads the bytes, loads no model
PEER: Final = "peer"  # another project's loader, ending in the same filled model
KINDS: Final = (STRATEGY, REFERENCE, PEER)
DEFAULT_STRATEGY: Final = "pipelined"  # what `loader.load_model` uses when no strategy is named

# -- checkpoint forms: what a strategy's `path` must be (`prepare` converts a file to the others) --
FILE: Final = "file"  # one .safetensors file, or a folder of them (with or without an index)
SHARDED_DIR: Final = "sharded-dir"  # a directory of per-process shard files plus manifest.json
ORBAX: Final = "orbax"  # an Orbax checkpoint
URL: Final = "url"  # a remote checkpoint only (`bench run --source http|s3|hf`; loader.remote)
CHECKPOINTS: Final = (FILE, SHARDED_DIR, ORBAX, URL)

# -- `pipelined`'s `cache_policy=` (`bench run --cache-policy`) -----------------------------------
KEEP: Final = "keep"  # read through the page cache and leave it as it is
DONTNEED: Final = "dontneed"  # drop each range from the page cache once it is read
AUTO: Final = "auto"  # drop behind the readers only what will not fit with the model (the default)
CACHE_POLICIES: Final = (AUTO, KEEP, DONTNEED)

# -- `sharded`'s `share=` (`bench run --share`; `loader.sharded.share`) ---------------------------
REGIONS: Final = "regions"  # each process reads its own devices' index ranges
BYTES: Final = "bytes"  # each reads a leading-axis block, resharded over the interconnect
SHARE_CHOICES: Final = (REGIONS, BYTES, AUTO)  # AUTO: chosen per load (the default)

# -- `load_model(casts=...)`: how a float-to-float cast to the model's dtype is taken --------------
REPORT: Final = "report"  # a mismatch like any other: warned, or raised under strict (the default)
ALLOW: Final = "allow"  # expected: listed in the report's casts, neither warned nor raised
CAST_POLICIES: Final = (REPORT, ALLOW)

# -- `loader.plan` verdicts: what a load would do with each model path and file key ---------------
LOAD: Final = "load"  # read as it is stored
TRANSFORM: Final = "transform"  # read through a key_map transform
CAST_VERDICT: Final = "cast"  # read and cast to the model's dtype (an expected or exact cast)
MISSING: Final = "missing"  # no tensor in the file for this model path
UNEXPECTED: Final = "unexpected"  # a file key no model path asks for
IGNORED: Final = "ignored"  # missing or unexpected, and declared so (ignore_missing / _unexpected)
SHAPE_MISMATCH: Final = "shape mismatch"  # the file's shape (transformed) is not the model's
DTYPE_MISMATCH: Final = "dtype mismatch"  # a cast the policy reports (or a change of kind)
VERDICTS: Final = (
    LOAD,
    TRANSFORM,
    CAST_VERDICT,
    MISSING,
    UNEXPECTED,
    IGNORED,
    SHAPE_MISMATCH,
    DTYPE_MISMATCH,
)
