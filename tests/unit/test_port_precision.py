"""`compare_to_transformers` on a TPU host: the port's forward runs at the matmul precision the
check needs ("highest": float32 on every backend), and the result names the backend and the
precision, so a correct port is not called wrong where the default matmul is one bfloat16 pass.

torch and transformers are stood in for by a float64 numpy reference (the framework is not what
is checked here, and a TPU host has no torch). A TPU's default precision is emulated on the CPU
backend by a port that rounds its matmul operands to bfloat16 unless the precision asked for is
float32: the check must pass it at "highest" and fail it at the backend's default. The
`tpu`-marked test does the same on the chip, with its real default precision.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from loader.planning import source_check
from loader.planning.source_check import FP32_TOLERANCE, compare_to_transformers

RNG = np.random.default_rng(0)
X = RNG.standard_normal((4, 256)).astype(np.float32)
W = (RNG.standard_normal((256, 64)) / 16).astype(np.float32)  # outputs of order 1
EXACT = {"highest", "float32"}


class _Tensor:
    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def float(self) -> _Tensor:
        return self

    def numpy(self) -> np.ndarray:
        return self.array


class _Source:
    """The source model: logits = x @ W in float64, rounded once to float32."""

    @classmethod
    def from_pretrained(cls, folder: str) -> _Source:
        return cls()

    def float(self) -> _Source:
        return self

    def eval(self) -> _Source:
        return self

    def __call__(self, x) -> dict[str, _Tensor]:
        exact = np.asarray(x.array, np.float64) @ W.astype(np.float64)
        return {"logits": _Tensor(exact.astype(np.float32))}


@pytest.fixture
def framework(monkeypatch):
    """torch and transformers as the check uses them, in numpy."""
    torch = SimpleNamespace(
        Tensor=_Tensor,
        no_grad=contextlib.nullcontext,
        as_tensor=lambda a: _Tensor(np.asarray(a)),
    )
    monkeypatch.setattr(source_check, "_framework", lambda: (torch, SimpleNamespace()))


def _emulated_tpu_port(seen: list):
    """x @ W as a TPU computes it at its default precision (operands rounded to bfloat16, one
    pass, float32 accumulation) unless the precision in force is float32; records the precision
    it was traced at and the HLO's."""
    w = jnp.asarray(W)

    def port(x):
        precision = jax.config.jax_default_matmul_precision
        seen.append(precision)
        if precision not in EXACT:
            x, wt = x.astype(jnp.bfloat16), w.astype(jnp.bfloat16)
            return jnp.matmul(x, wt, preferred_element_type=jnp.float32)
        hlo = jax.jit(jnp.matmul).lower(x, w).as_text()
        seen.append("HIGHEST" if "precision = [HIGHEST, HIGHEST]" in hlo else "hlo: default")
        return jnp.matmul(x, w)

    return port


def test_the_port_runs_at_highest_precision_and_passes(framework):
    seen: list = []
    result = compare_to_transformers("src", _emulated_tpu_port(seen), {"x": X}, model_class=_Source)
    print(result)
    assert seen == ["highest", "HIGHEST"]  # in force while traced, and in the compiled program
    assert result.ok and result.deltas["logits"] <= FP32_TOLERANCE
    assert result.precision == "highest" and result.backend == jax.default_backend()
    assert f"on {jax.default_backend()}, matmul precision highest:" in str(result)


def test_at_the_backends_default_the_same_port_is_called_wrong(framework):
    """Without the precision the check sets, the emulated TPU's one-pass matmul misses the
    float32 tolerance by far: what the check would have said of a correct port on a TPU."""
    seen: list = []
    result = compare_to_transformers(
        "src", _emulated_tpu_port(seen), {"x": X}, model_class=_Source, precision=None
    )
    print(result)
    assert seen == [None]
    assert not result.ok and result.deltas["logits"] > 100 * FP32_TOLERANCE
    assert "matmul precision cpu default" in str(result) and "OVER 1e-05" in str(result)


def test_a_tpus_default_precision_is_judged_at_the_tpus_tolerance(framework, monkeypatch):
    """Asked to run at a TPU's default, the check names the backend and holds the port to that
    backend's tolerance (1e-2), not to float32's."""
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    seen: list = []
    result = compare_to_transformers(
        "src", _emulated_tpu_port(seen), {"x": X}, model_class=_Source, precision=None
    )
    print(result)
    assert result.backend == "tpu" and result.precision is None
    assert result.tolerance == source_check.BACKEND_DEFAULT_TOLERANCE["tpu"] == 1e-2
    assert "on tpu, matmul precision tpu default:" in str(result)
    assert source_check.default_tolerance("tpu", "highest") == FP32_TOLERANCE
    assert source_check.default_tolerance("cpu", None) == FP32_TOLERANCE


def test_a_wrong_port_still_fails_at_highest_precision(framework):
    """The precision is no looser check: a transposed weight is caught as before."""
    w = jnp.asarray(W[::-1])
    result = compare_to_transformers("src", lambda x: x @ w, {"x": X}, model_class=_Source)
    assert not result.ok and result.deltas["logits"] > 1.0


@pytest.mark.tpu
def test_on_the_tpu_the_default_precision_misses_fp32_and_the_check_does_not(framework):
    """The chip's own default float32 matmul is about three digits off a float64 reference; the
    check's forward, at "highest", is within float32 noise, and the verdict is ok."""
    assert jax.default_backend() == "tpu"
    w = jnp.asarray(W)
    coarse = np.asarray(jax.jit(jnp.matmul)(jnp.asarray(X), w))
    exact = X.astype(np.float64) @ W.astype(np.float64)
    assert float(np.max(np.abs(coarse - exact))) > 10 * FP32_TOLERANCE
    result = compare_to_transformers("src", jax.jit(lambda x: x @ w), {"x": X}, model_class=_Source)
    print(result)
    assert result.backend == "tpu" and result.ok, str(result)
