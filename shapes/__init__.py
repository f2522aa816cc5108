"""Tensor shapes of real checkpoints: specs, presets, Hub header fetch, synthesis, NNX models.

Public API:
    load_spec(name_or_path) -> ShapeSpec
    synthesize(spec, out_dir, *, dtype=None, seed=0) -> Path
    tensor_values(spec, name, *, dtype=None, seed=0) -> np.ndarray
    verify_tensor(checkpoint_path, name, array) -> None
    model_builder(spec, *, dtype=None, seed=0) -> Callable[[], nnx.Module]
    fetch_spec(repo_id, *, revision=None) -> ShapeSpec   (needs huggingface_hub)

jax/flax and huggingface_hub are imported only when `model_builder` / `fetch_spec` are used.
"""

from __future__ import annotations

from shapes.catalog import fetched_names, load_spec, preset_names, user_presets_dir
from shapes.errors import FetchError, ShapesError, UnknownSpecError, VerificationError
from shapes.spec import ShapeSpec, TensorSpec
from shapes.synth import is_synthesized, read_digests, synthesize, tensor_values, verify_tensor

__all__ = [
    "FetchError",
    "ShapeSpec",
    "ShapesError",
    "TensorSpec",
    "UnknownSpecError",
    "VerificationError",
    "fetch_spec",
    "fetched_names",
    "is_synthesized",
    "load_spec",
    "model_builder",
    "preset_names",
    "read_digests",
    "synthesize",
    "tensor_values",
    "user_presets_dir",
    "verify_tensor",
]


def __getattr__(name: str):
    if name == "model_builder":
        from shapes.model import model_builder

        return model_builder
    if name == "fetch_spec":
        from shapes.hub import fetch_spec

        return fetch_spec
    raise AttributeError(f"module 'shapes' has no attribute {name!r}")
