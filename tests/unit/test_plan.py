"""`loader.plan` and `loadbench plan`: the dry run lists every leaf and reads no tensor byte."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from flax import nnx
from nnx_models import MLP
from safetensors.numpy import save_file

import loader
from bench.cli import main
from loader.format.header import encode_header
from loader.format.source import CheckpointSource
from shapes.catalog import load_spec

MODELS = """
from flax import nnx
from nnx_models import MLP

def build():
    return MLP(nnx.Rngs(0))

def broken():
    raise ValueError("no config given")

KEY_MAP = {"fc1.kernel": "fc1.weight"}
"""


def header_only(path, entries: dict[str, tuple[str, tuple[int, ...]]]) -> None:
    """A checkpoint whose data region is a hole: only its header holds anything."""
    header, offsets = encode_header(entries, None)
    size = max((end for _, end in offsets.values()), default=0)
    with open(path, "wb") as fh:
        fh.write(header)
        fh.truncate(len(header) + size)


@pytest.fixture
def no_tensor_reads(monkeypatch):
    """Make every tensor read fail: only the header may be read."""

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor was read during a dry run")

    monkeypatch.setattr(CheckpointSource, "read", refuse)
    monkeypatch.setattr(CheckpointSource, "read_into", refuse, raising=False)
    monkeypatch.setattr(os, "pread", refuse)
    monkeypatch.setattr(os, "preadv", refuse)


def _file(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "fc1.weight": rng.standard_normal((8, 16)).astype(np.float32),
        "fc1.bias": np.zeros(16, np.float32),
        "fc2.kernel": np.zeros((16, 4), np.float16),
        "pooler.w": np.zeros(3, np.float32),
        "junk": np.zeros(2, np.float32),
    }
    save_file(tensors, str(tmp_path / "m.safetensors"))
    return tmp_path / "m.safetensors"


def test_plan_gives_a_verdict_per_model_path_and_file_key(tmp_path, no_tensor_reads):
    table = loader.plan(
        lambda: MLP(nnx.Rngs(0)),
        _file(tmp_path),
        key_map={"fc1.kernel": "fc1.weight"},
        ignore_unexpected="pooler.*",
    )
    verdicts = {(e.path, e.file_key): e.verdict for e in table.entries}
    assert verdicts == {
        ("fc1.bias", "fc1.bias"): "load",
        ("fc1.kernel", "fc1.weight"): "load",
        ("fc2.bias", "fc2.bias"): "missing",
        ("fc2.kernel", "fc2.kernel"): "dtype mismatch",
        ("", "junk"): "unexpected",
        ("", "pooler.w"): "ignored",
    }
    assert table.report.ignored == ["pooler.w"] and table.report.missing == ["fc2.bias"]
    allowed = loader.plan(lambda: MLP(nnx.Rngs(0)), _file(tmp_path), casts="allow")
    assert {e.path: e.verdict for e in allowed.entries}["fc2.kernel"] == "cast"


def test_the_table_is_aligned_and_names_every_path_key_and_transform(tmp_path, no_tensor_reads):
    key_map = {"fc1.kernel": ("fc1.weight", loader.Transpose((0, 1)))}
    text = str(loader.plan(lambda: MLP(nnx.Rngs(0)), _file(tmp_path), key_map=key_map))
    lines = text.splitlines()
    header, rule = lines[0], lines[1]
    assert header.split()[:3] == ["model", "path", "shape"] and set(rule) <= {"-", " "}
    column = header.index("verdict")
    for line in lines[2:8]:
        assert line[column - 2 : column] == "  " and line[column] != " "
    assert "fc1.kernel  8x16" in text and "Transpose((0, 1))" in text and "transform" in text
    assert "fc2.bias: missing from the checkpoint" in text  # the problems a strict load raises


def test_plan_reads_only_the_headers_of_a_sparse_checkpoint(tmp_path, no_tensor_reads):
    """A header-only file (its data a hole) plans like the real one: no byte of it is read."""
    path = tmp_path / "sparse.safetensors"
    entries = {"fc1.kernel": ("F32", (8, 16)), "fc1.bias": ("F32", (16,))}
    header_only(path, entries | {"fc2.kernel": ("F32", (16, 4)), "fc2.bias": ("F32", (4,))})
    table = loader.plan(lambda: MLP(nnx.Rngs(0)), path)
    assert table.counts() == {"load": 4} and table.report.ok


def test_plan_of_a_port_lists_every_leaf_with_its_file_key_and_transform(tmp_path, capsys):
    spec = load_spec("tiny-gpt2")
    path = tmp_path / "tiny-gpt2.safetensors"
    header_only(path, {t.name: (t.dtype, tuple(t.shape)) for t in spec.tensors})
    assert main(["plan", "--port", "tiny-gpt2", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    paths = [e for e in out["entries"] if e["path"]]
    assert paths and all(e["file_key"] and e["verdict"] in {"load", "transform"} for e in paths)
    q = next(e for e in paths if e["path"] == "h.0.attn.q.kernel")
    assert q["transform"] == "Slice(1, 0, 32) then Reshape((32, 4, 8))"
    assert out["problems"] == []


@pytest.fixture
def models_module(tmp_path, monkeypatch):
    (tmp_path / "plan_models.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "plan_models"
    sys.modules.pop("plan_models", None)


def test_the_cli_prints_the_table_and_json(tmp_path, models_module, capsys):
    path = str(_file(tmp_path))
    args = ["plan", path, "--model", f"{models_module}:build"]
    assert main([*args, "--key-map", f"{models_module}:KEY_MAP", "--ignore-unexpected", "p*"]) == 0
    text = capsys.readouterr().out
    assert "fc1.kernel" in text and "fc1.weight" in text and "ignored" in text
    assert main([*args, "--json", "--casts", "allow"]) == 0
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts == {"load": 1, "cast": 1, "missing": 2, "unexpected": 3}


@pytest.mark.parametrize(
    ("model", "said"),
    [
        (":broken", "the factory raised ValueError: no config given"),
        ("no_such_module_here:build", "cannot import 'no_such_module_here' (ModuleNotFoundError"),
        (":nothing", "has no attribute 'nothing'"),
        ("", "expected MODULE:NAME"),
    ],
)
def test_a_bad_factory_is_one_line_naming_it_and_exit_2(
    model, said, tmp_path, models_module, capsys
):
    spec = f"{models_module}{model}" if model.startswith(":") else model
    assert main(["plan", str(_file(tmp_path)), "--model", spec or "nocolon"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("loadbench: error: --model ")
    assert said in err
