"""Small NNX models that exercise every kind of leaf the loader must round-trip."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from loader.placement.leaves import is_prng_dtype, iter_variables


class MLP(nnx.Module):
    def __init__(
        self, rngs: nnx.Rngs, *, dtype=jnp.float32, din: int = 8, dh: int = 16, dout: int = 4
    ):
        self.fc1 = nnx.Linear(din, dh, param_dtype=dtype, rngs=rngs)
        self.fc2 = nnx.Linear(dh, dout, param_dtype=dtype, rngs=rngs)


class Stack(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, *, dtype=jnp.float32, depth: int = 3):
        self.layers = nnx.List(
            [nnx.Linear(6, 6, param_dtype=dtype, rngs=rngs) for _ in range(depth)]
        )


class Tied(nnx.Module):
    def __init__(self, rngs: nnx.Rngs, *, dtype=jnp.float32):
        self.wte = nnx.Embed(20, 8, param_dtype=dtype, rngs=rngs)
        self.lm_head = self.wte


class Everything(nnx.Module):
    """Dropout + Rngs, BatchNorm statistics, a Python int step counter, a stack."""

    def __init__(self, rngs: nnx.Rngs, *, dtype=jnp.float32):
        self.stack = Stack(rngs, dtype=dtype, depth=2)
        self.bn = nnx.BatchNorm(6, param_dtype=dtype, rngs=rngs)
        self.drop = nnx.Dropout(0.5, rngs=rngs)
        self.step = nnx.Variable(0)

    def __call__(self, x):
        for layer in self.stack.layers:
            x = layer(x)
        return self.drop(self.bn(x))


def host_bits(value) -> tuple:
    """A bitwise-comparable form of a leaf value (PRNG keys as key data; scalars with a type)."""
    if isinstance(value, (bool, int, float)):
        return (type(value), value)
    if is_prng_dtype(value.dtype):
        value = jax.random.key_data(value)
    arr = np.asarray(value)
    return (arr.dtype.str if arr.dtype.kind != "V" else str(arr.dtype), arr.shape, arr.tobytes())


def leaf_map(model) -> dict[str, tuple]:
    return {".".join(map(str, p)): host_bits(v.get_value()) for p, v in iter_variables(model)}


def assert_same_leaves(a, b) -> None:
    ma, mb = leaf_map(a), leaf_map(b)
    assert ma.keys() == mb.keys()
    diff = [k for k in ma if ma[k] != mb[k]]
    assert not diff, f"leaves differ: {diff}"
