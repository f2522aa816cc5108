"""A port checked against its source framework: the Hugging Face model and the port, same inputs.

A strict load proves that every leaf got a tensor of the right shape; it cannot prove the tensor
is the right way round. A square weight left untransposed (a 384x384 attention projection) loads
"ok" and gives wrong outputs. Only running the source model beside the port catches that, so
`compare_to_transformers` builds the model transformers builds from a folder (`from_pretrained`:
its `config.json` and weights), runs it and the port on the same inputs in float32, and reports
max |delta| per output, named as transformers names them (`logits`, `last_hidden_state`, ...).
The port runs under `jax.default_matmul_precision("highest")` (`precision=`): a TPU's default
float32 matmul goes through one bfloat16 pass and agrees with a float32 reference to about three
digits, so a correct port would be called wrong there; at "highest" it is float32 on every
backend. The result names the backend and the precision it ran at. `precision=None` runs at the
backend's default, and the default tolerance is then the backend's (`default_tolerance`).

Without `model_class=`, the class is `config.json`'s `architectures[0]`, unless the port's outputs
ask for `last_hidden_state`: then it is the base model (`AutoModel`), since a checkpoint saved by a
head class (`MPNetForMaskedLM`, a sentence-embedding model) would otherwise be run with its head,
which transformers may initialise at random and whose outputs are not the port's.

torch and transformers are the `ports` extra (`make ports-deps`); they are imported on the first
call, never by `import loader`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

#: fp32 noise between two frameworks computing the same float32 forward (the ports' own tests)
FP32_TOLERANCE = 1e-5
#: the matmul precision the port's forward runs at (`jax.default_matmul_precision`): float32 on
#: every backend (on a TPU: six bfloat16 passes, not one)
PRECISION = "highest"
#: max |delta| of a float32 forward at a backend's *default* matmul precision, where it is not
#: float32: a TPU's single bfloat16 pass (8 bits of mantissa) agrees to about three digits
BACKEND_DEFAULT_TOLERANCE = {"tpu": 1e-2}


def default_tolerance(backend: str, precision: str | None) -> float:
    """The max |delta| a port is held to on `backend` at `precision` (None: the backend's own
    default): float32 noise, unless the backend's default matmul is coarser (a TPU's)."""
    if precision is None:
        return BACKEND_DEFAULT_TOLERANCE.get(backend, FP32_TOLERANCE)
    return FP32_TOLERANCE


@dataclass(frozen=True)
class OutputDelta:
    """One output compared: its name and shape, max |port - source|, max |source| (scale), and
    the dtype the port gave it in (the source always runs in float32)."""

    name: str
    shape: tuple[int, ...]
    max_abs_delta: float
    max_abs_source: float
    port_dtype: str = "float32"


@dataclass(frozen=True)
class Comparison:
    """The port against the source model: one `OutputDelta` per compared output.

    `ok` when every output is within `tolerance`; `str()` is one aligned line per output. `backend`
    and `precision` say where the port ran and at which matmul precision (None: the backend's
    default), so a tolerance is never read without them.

    Example:
        >>> print(comparison)
        MPNetModel from mpnet/ (float32) against the port (bfloat16) on tpu, matmul precision
        highest:
          last_hidden_state  (2, 16, 32)  max |delta| 8.3e-03  (max |source| 4.1)  OVER 1e-05
    """

    folder: str
    model_class: str
    outputs: tuple[OutputDelta, ...]
    tolerance: float
    backend: str = "cpu"
    precision: str | None = PRECISION

    @property
    def ok(self) -> bool:
        return all(o.max_abs_delta <= self.tolerance for o in self.outputs)

    @property
    def deltas(self) -> dict[str, float]:
        """max |delta| by output name."""
        return {o.name: o.max_abs_delta for o in self.outputs}

    def __str__(self) -> str:
        width = max(len(o.name) for o in self.outputs)
        shapes = [str(o.shape) for o in self.outputs]
        shape_width = max(len(s) for s in shapes)
        ported = ", ".join(sorted({o.port_dtype for o in self.outputs}))
        ran = f"matmul precision {self.precision or f'{self.backend} default'}"
        lines = [
            f"{self.model_class} from {self.folder} (float32) against the port ({ported}) "
            f"on {self.backend}, {ran}:"
        ]
        for o, shape in zip(self.outputs, shapes):
            verdict = "ok" if o.max_abs_delta <= self.tolerance else f"OVER {self.tolerance:g}"
            lines.append(
                f"  {o.name:<{width}}  {shape:<{shape_width}}  max |delta| {o.max_abs_delta:.2g}"
                f"  (max |source| {o.max_abs_source:.2g})  {verdict}"
            )
        return "\n".join(lines)


def _framework() -> tuple[Any, Any]:
    """(torch, transformers), or an ImportError that says how to install them."""
    try:
        torch: ModuleType = importlib.import_module("torch")
        transformers: ModuleType = importlib.import_module("transformers")
    except ImportError as exc:
        raise ImportError(
            f"compare_to_transformers needs torch and transformers (the `ports` extra), and "
            f"{exc.name or exc} is not installed: run `make ports-deps` "
            "(or pip install 'loadbench[ports]')"
        ) from None
    return torch, transformers


#: the output only a base model (no head) gives: asked for, it picks `AutoModel`
BASE_OUTPUT = "last_hidden_state"


def _source_model(
    transformers: Any, folder: str, model_class: str | type | None, wanted: Sequence[str]
) -> Any:
    if model_class is None and BASE_OUTPUT in wanted:
        return transformers.AutoModel.from_pretrained(folder).float().eval()
    if model_class is None:
        config = transformers.AutoConfig.from_pretrained(folder)
        names = list(getattr(config, "architectures", None) or [])
        if not names:
            raise ValueError(
                f"{folder}/config.json names no `architectures`; pass model_class= "
                "(e.g. transformers.BertModel or 'BertModel')"
            )
        model_class = names[0]
    if isinstance(model_class, str):
        if not hasattr(transformers, model_class):
            raise ValueError(f"transformers has no model class {model_class!r} (model_class=)")
        model_class = getattr(transformers, model_class)
    cls: Any = model_class
    return cls.from_pretrained(folder).float().eval()


def _named_outputs(
    port_out: Any, source: Mapping[str, np.ndarray], names: Sequence[str] | None, source_class: str
) -> list[tuple[str, Any]]:
    """The port's outputs by the source's names: a mapping by its keys, a sequence by position
    (`names`, or the source's own order), one array as the first (or `names[0]`)."""
    if isinstance(port_out, Mapping):
        pairs = list(port_out.items())
    else:
        values = list(port_out) if isinstance(port_out, tuple | list) else [port_out]
        order = list(names) if names is not None else list(source)
        if len(values) > len(order):
            raise ValueError(
                f"the port returned {len(values)} outputs, the source names {len(order)}: "
                f"{', '.join(order)}; pass outputs= to name them"
            )
        pairs = list(zip(order, values))
    unknown = [name for name, _ in pairs if name not in source]
    if unknown:
        raise ValueError(
            f"port output {unknown[0]!r} is not among the outputs of {source_class} "
            f"({', '.join(source)}); name the port's outputs as transformers does, or pass "
            f"model_class= the transformers class whose forward gives {unknown[0]!r} (a head "
            f"class such as ...ForMaskedLM gives logits; the base model, e.g. 'BertModel', "
            f"gives {BASE_OUTPUT})"
        )
    return pairs


def compare_to_transformers(
    folder: str | os.PathLike[str],
    port: Callable[..., Any],
    inputs: Mapping[str, Any],
    *,
    outputs: Sequence[str] | None = None,
    model_class: str | type | None = None,
    tolerance: float | None = None,
    precision: str | None = PRECISION,
) -> Comparison:
    """Run the Hugging Face model in `folder` and the port on the same `inputs`; max |delta| each.

    Args:
        folder: what `from_pretrained` reads: `config.json` and the weights (the file the port
            loaded, or one `save_model(..., key_map=)` wrote back).
        port: the port's forward, called as `port(**inputs)` with jax arrays; wrap it to rename
            or re-lay out an input (a ViT port that takes NHWC where transformers takes NCHW:
            `lambda pixel_values: model(pixel_values.transpose(0, 2, 3, 1))`). It returns an
            array, a tuple of arrays, or a mapping of them by the source's output names.
        inputs: the source model's keyword inputs as numpy arrays (`input_ids`, `attention_mask`,
            `pixel_values`, ...).
        outputs: the source output names of the port's outputs, in order (default: the source
            model's own order; a mapping needs none).
        model_class: a transformers class or its name (default: the base model, `AutoModel`,
            when the port's outputs ask for `last_hidden_state`; else `config.json`'s
            `architectures[0]`, e.g. `GPT2LMHeadModel`).
        tolerance: the max |delta| called ok (default `default_tolerance(backend, precision)`:
            fp32 noise, 1e-5; at a TPU's default precision, 1e-2).
        precision: the matmul precision the port's forward runs at, as
            `jax.default_matmul_precision` takes it (default "highest": float32 on every
            backend, a TPU's included); None runs it at the backend's default.

    Returns:
        A `Comparison`: `.deltas` by output name, `.ok`, and a table as its `str()`.

    Example:
        >>> ids = np.array([[464, 2068, 7586, 21831]])
        >>> result = compare_to_transformers("gpt2/", lambda input_ids: model(input_ids),
        ...                                  {"input_ids": ids})
        >>> print(result)   # logits  (1, 4, 50257)  max |delta| 1.1e-05 ...
    """
    import contextlib

    import jax
    import jax.numpy as jnp

    torch, transformers = _framework()
    backend = jax.default_backend()
    if tolerance is None:
        tolerance = default_tolerance(backend, precision)
    at = contextlib.nullcontext() if precision is None else jax.default_matmul_precision(precision)
    with at:  # traced, compiled and run at `precision`; fetched before the context ends
        got = port(**{k: jnp.asarray(v) for k, v in inputs.items()})
        got = jax.tree.map(np.asarray, got)
    wanted = list(got) if isinstance(got, Mapping) else list(outputs or [])
    source_model = _source_model(transformers, os.fspath(folder), model_class, wanted)
    with torch.no_grad():
        raw = source_model(**{k: torch.as_tensor(np.asarray(v)) for k, v in inputs.items()})
    source = {
        name: value.float().numpy()
        for name, value in raw.items()
        if isinstance(value, torch.Tensor)
    }
    compared = []
    for name, value in _named_outputs(got, source, outputs, type(source_model).__name__):
        mine, theirs = np.asarray(value, np.float32), source[name]
        if mine.shape != theirs.shape:
            raise ValueError(
                f"output {name!r}: the port gives shape {mine.shape}, the source {theirs.shape}"
            )
        delta = float(np.max(np.abs(mine - theirs))) if mine.size else 0.0
        scale = float(np.max(np.abs(theirs))) if theirs.size else 0.0
        dtype = str(getattr(value, "dtype", mine.dtype))
        compared.append(OutputDelta(name, tuple(mine.shape), delta, scale, dtype))
    return Comparison(
        os.fspath(folder),
        type(source_model).__name__,
        tuple(compared),
        float(tolerance),
        backend,
        precision,
    )
