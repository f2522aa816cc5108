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


class Square(nnx.Module):
    """Four square projections and a norm: a port's attention block in small."""

    def __init__(self, rngs: nnx.Rngs):
        self.q, self.k, self.v, self.o = (nnx.Linear(8, 8, rngs=rngs) for _ in range(4))
        self.norm = nnx.LayerNorm(8, rngs=rngs)


def test_a_square_weight_left_untransposed_among_transposed_siblings_is_flagged(tmp_path):
    path = tmp_path / "attn.safetensors"
    names = ("q", "k", "v", "o")
    header_only(
        path,
        {f"{n}.weight": ("F32", (8, 8)) for n in names}
        | {f"{n}.bias": ("F32", (8,)) for n in names}
        | {"norm.weight": ("F32", (8,)), "norm.bias": ("F32", (8,))},
    )
    key_map = {f"{n}.kernel": (f"{n}.weight", loader.Transpose((1, 0))) for n in "qkv"}
    key_map |= {"o.kernel": "o.weight", "norm.scale": "norm.weight"}
    table = loader.plan(lambda: Square(nnx.Rngs(0)), path, key_map=key_map)
    assert table.report.ok  # a strict load cannot see it
    assert len(table.suspects) == 1 and table.suspects[0].startswith("o.kernel: not transposed")
    assert "unlike 3 other kernel 8x8" in table.suspects[0]
    assert "suspect(s) a strict load cannot see" in str(table)
    assert table.to_dict()["suspects"] == list(table.suspects)
    key_map["o.kernel"] = ("o.weight", loader.Transpose((1, 0)))
    assert loader.plan(lambda: Square(nnx.Rngs(0)), path, key_map=key_map).suspects == ()


class Deep(nnx.Module):
    """An encoder's worth of leaves: 24 layers of 4 linears, 192 leaves."""

    def __init__(self, rngs: nnx.Rngs):
        self.layers = nnx.List(
            [
                nnx.Dict({n: nnx.Linear(4, 4, rngs=rngs) for n in ("query", "key", "value", "out")})
                for _ in range(24)
            ]
        )


def test_every_mismatch_gets_its_closest_name_however_many_and_the_table_fits_120(tmp_path):
    """A first load without a key map: 192 leaves missing and 192 file keys unexpected (over the
    200 that once stopped the hints), each with the same layer's closest name."""
    path = tmp_path / "deep.safetensors"
    entries = {}
    for i in range(24):
        for n in ("query", "key", "value", "out"):
            base = f"encoder.layer.{i}.attention.{n}"
            entries |= {f"{base}.weight": ("F32", (4, 4)), f"{base}.bias": ("F32", (4,))}
    header_only(path, entries)
    table = loader.plan(lambda: Deep(nnx.Rngs(0)), path)
    report = table.report
    assert len(report.missing_keys) == len(report.unexpected_keys) == 192
    assert all(m.closest for m in report.missing_keys)
    assert all(u.closest for u in report.unexpected_keys)
    by_path = {m.path: m.closest for m in report.missing_keys}
    assert by_path["layers.17.query.bias"] == "encoder.layer.17.attention.query.bias"
    assert max(len(line) for line in str(table).splitlines()[:400]) <= 120


@pytest.fixture
def models_module(tmp_path, monkeypatch):
    (tmp_path / "plan_models.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "plan_models"
    sys.modules.pop("plan_models", None)


def test_the_cli_prints_the_table_and_json(tmp_path, models_module, capsys):
    path = str(_file(tmp_path))
    args = ["plan", path, "--model", f"{models_module}:build"]
    # fc2.bias is missing and fc2.kernel's dtype differs: a strict load would raise, so exit 1
    assert main([*args, "--key-map", f"{models_module}:KEY_MAP", "--ignore-unexpected", "p*"]) == 1
    text = capsys.readouterr().out
    assert "fc1.kernel" in text and "fc1.weight" in text and "ignored" in text
    assert "problem(s) a strict load would raise" in text
    assert main([*args, "--json", "--casts", "allow"]) == 1
    counts = json.loads(capsys.readouterr().out)["counts"]
    assert counts == {"load": 1, "cast": 1, "missing": 2, "unexpected": 3}


def test_the_cli_exits_0_when_a_strict_load_would_pass(tmp_path, models_module, capsys):
    path = tmp_path / "ok.safetensors"
    header_only(path, {"fc1.weight": ("F32", (8, 16)), "fc1.bias": ("F32", (16,))} | FC2)
    args = ["plan", str(path), "--model", f"{models_module}:build"]
    assert main([*args, "--key-map", f"{models_module}:KEY_MAP"]) == 0
    assert "problem(s)" not in capsys.readouterr().out


FC2 = {"fc2.kernel": ("F32", (16, 4)), "fc2.bias": ("F32", (4,))}


def test_the_console_script_imports_a_module_from_the_working_directory(tmp_path):
    """`loadbench plan --model mymodels:build` run where mymodels.py lies, without PYTHONPATH."""
    import subprocess
    from pathlib import Path

    here = Path(__file__).parent
    (tmp_path / "cwd_models.py").write_text(MODELS)
    path = tmp_path / "m.safetensors"
    header_only(path, {"fc1.kernel": ("F32", (8, 16)), "fc1.bias": ("F32", (16,))} | FC2)
    script = Path(sys.executable).with_name("loadbench")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(here)  # only for nnx_models, which the user's module imports
    done = subprocess.run(
        [str(script), "plan", "--model", "cwd_models:build", str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "fc1.kernel" in done.stdout and "4 load" in done.stdout


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


def test_a_wrong_checkpoint_is_said_first_not_after_every_name(tmp_path, models_module, capsys):
    """Issue 54: `plan` on the wrong checkpoint printed 1,085 lines, its summary at line 724, and
    never said "nothing matches". Now: the counts, then that line, in three lines (--all: all)."""
    path = tmp_path / "other.safetensors"
    header_only(path, {f"encoder.layer.{i}.weight": ("F32", (4, 4)) for i in range(40)})
    args = ["plan", str(path), "--model", f"{models_module}:build"]
    assert main(args) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"{path}: ")
    assert lines[1].startswith("nothing matches: none of the model's 4 paths names one of the ")
    assert "file's 40 keys: wrong checkpoint" in lines[1] and "encoder.layer.0.weight" in lines[1]
    assert main([*args, "--all"]) == 1
    every = capsys.readouterr().out
    assert "encoder.layer.39.weight" in every and every.rstrip().endswith(lines[1])


def test_a_plan_with_a_budget_shows_it_as_typed_and_in_the_table_and_json(
    tmp_path, models_module, capsys
):
    args = ["plan", str(_file(tmp_path)), "--model", f"{models_module}:build", "--budget", "16MiB"]
    main(args)
    text = capsys.readouterr().out
    assert text.splitlines()[1] == "planned with --budget 16MiB"
    assert "load options: budget=16777216 bytes" in text
    main([*args, "--json"])
    assert json.loads(capsys.readouterr().out)["options"] == {"budget": 16 << 20}
    main(args[:4])
    assert "planned with" not in (text := capsys.readouterr().out) and "load options" not in text
