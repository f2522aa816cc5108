"""The budget is a bound on the staged path at a small budget (forced on the CPU backend), counted
two ways: by the engine's own accounting (`LoadReport.inflight_peak_bytes`), and independently, by
the host bytes that are alive at once as the `mmap` and the staging ring's allocations say (the
file's windows mapped for chunks sent straight from its pages, and the ring's slots), whatever the
engine believes it holds.

The checkpoint's leaves are several times the budget, so a path that maps a shard's worth of pages
(a large window kept alive by a chunk in flight, a whole leaf mapped) fails here.

A cast onto the devices compiles no device program per tensor shape: its leaves go in the same
pieces as a plain load's, so it compiles what the plain load compiles, no more.
"""

from __future__ import annotations

import gc
import mmap
import threading
import types
import warnings
import weakref

import numpy as np
import pytest

import loader
import shapes
from loader.pipeline import file_pages, ring
from loader.placement.leaves import iter_variables

F = "model.safetensors"
MIB = 1 << 20
BUDGET = 16 * MIB
#: What may be alive beside the budget: the file's current window mapped and the one before it
#: (chunks still in flight from it), at most 16 MiB each.
ALLOWANCE = 32 * MIB
#: 96 MiB of float32 in three leaves, the largest 4x the budget.
LARGE = shapes.ShapeSpec(
    "large",
    "",
    (F,),
    (
        shapes.TensorSpec("a.weight", "F32", (4096, 4096), F),
        shapes.TensorSpec("n.scale", "F32", (4096,), F),
        shapes.TensorSpec("b.weight", "F32", (2048, 4096), F),
    ),
)


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    return shapes.synthesize(LARGE, tmp_path_factory.mktemp("large"))


class Alive:
    """Host bytes alive at once, by their allocations: each file window `mmap`ed by the loader's
    file pages (until it is unmapped) and each staging ring slot (until it is freed)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.peak = 0

    def born(self, obj: object, nbytes: int) -> None:
        with self.lock:
            self.now += nbytes
            self.peak = max(self.peak, self.now)
        weakref.finalize(obj, self._gone, nbytes)

    def _gone(self, nbytes: int) -> None:
        with self.lock:
            self.now -= nbytes


@pytest.fixture
def alive(monkeypatch):
    seen = Alive()

    class Window(mmap.mmap):
        def __init__(self, fd: int, length: int, **kw: object) -> None:
            seen.born(self, length)

    pages = types.SimpleNamespace(**{k: getattr(mmap, k) for k in dir(mmap) if k.isupper()})
    pages.mmap = Window  # the file pages' own `mmap` only (host buffers map memory too)
    monkeypatch.setattr(file_pages, "mmap", pages)
    real_aligned = ring.aligned

    def slot(shape, dtype):
        raw = real_aligned(shape, dtype)
        seen.born(raw.base if raw.base is not None else raw, raw.nbytes)
        return raw

    monkeypatch.setattr(ring, "aligned", slot)
    return seen


def verify(model, path) -> None:
    for key, var in iter_variables(model):
        shapes.verify_tensor(path, ".".join(map(str, key)), np.asarray(var.get_value()))


@pytest.mark.parametrize("dtype", [None, "bfloat16"], ids=["mapped", "cast"])
def test_host_bytes_alive_stay_within_the_budget_at_16_mib(large, poison, alive, dtype):
    model = shapes.model_builder(LARGE, dtype=dtype)()
    poison(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", loader.LoadWarning)  # the cast, expected
        model, report = loader.load_model(model, large, staging=True, budget=BUDGET)
    verify(model, large)
    assert report.staging_memory == ("mapped" if dtype is None else "pageable")
    assert 0 < report.inflight_peak_bytes <= BUDGET  # the engine's own accounting
    assert 0 < alive.peak <= BUDGET + ALLOWANCE, alive.peak / MIB  # what was alive at once
    gc.collect()
    assert alive.now == 0  # nothing left mapped or allocated once the load is done
