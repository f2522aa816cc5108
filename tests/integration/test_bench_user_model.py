"""`bench run --model MODULE:FACTORY --key-map MODULE:NAME --checkpoint FILE`: the user's own
NNX model, from a module in the folder the run starts in, imported by each child, verified
against the file; a key map that gets the file wrong is refused by name before anything runs
(the children's own check of such a load: `tests/unit/test_user_model.py`)."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from safetensors.numpy import save_file

from bench.cli import main
from bench.records.results import read_results
from bench.vocabulary import OK
from loader.vocabulary import TOTAL

MODULE = "own_model_for_bench"  # a name no other test imports
SOURCE = textwrap.dedent(
    """
    import jax.numpy as jnp
    from flax import nnx

    import loader


    class Tiny(nnx.Module):
        def __init__(self, rngs):
            # constant weights: a load that writes nothing leaves them, and the check fails
            init = nnx.initializers.constant(7.0)
            self.dense = nnx.Linear(4, 3, kernel_init=init, bias_init=init, rngs=rngs)
            self.head = nnx.Linear(3, 2, use_bias=False, kernel_init=init, rngs=rngs)


    def build():
        return Tiny(nnx.Rngs(0))


    FLIP = loader.Transpose((1, 0))  # the file holds torch's (out, in) layout
    KEY_MAP = {"dense.kernel": ("w1", FLIP), "dense.bias": "b1", "head.kernel": ("w2", FLIP)}
    WRONG_KEY_MAP = {"dense.kernel": "w1", "dense.bias": "b1", "head.kernel": ("w2", FLIP)}
    """
)


@pytest.fixture
def own_model(tmp_path, monkeypatch):
    """The module and a checkpoint in a fresh folder, the working directory there (the children
    start in it), the bench's cache beside it."""
    (tmp_path / f"{MODULE}.py").write_text(SOURCE)
    rng = np.random.default_rng(0)
    tensors = {
        "w1": rng.standard_normal((3, 4), dtype=np.float32),
        "b1": rng.standard_normal(3, dtype=np.float32),
        "w2": rng.standard_normal((2, 3), dtype=np.float32),
    }
    save_file(tensors, tmp_path / "model.safetensors")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m` puts the working directory
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path / "lbcache"))
    return tmp_path


def _bench(folder, key_map: str, capsys) -> tuple[dict, object]:
    argv = ["bench", "run", "--checkpoint", str(folder / "model.safetensors")]
    argv += ["--model", f"{MODULE}:build", "--key-map", f"{MODULE}:{key_map}"]
    argv += ["--strategies", "pipelined", "--repeats", "1", "--max-repeats", "1"]
    argv += ["--out", str(folder / f"results-{key_map}"), "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    rows = read_results(out["results_file"]).phases
    return out, rows[(rows["phase"] == TOTAL) & (rows["strategy"] == "pipelined")]


def test_own_model_runs_verified_and_a_wrong_key_map_is_named(own_model, capsys):
    out, rows = _bench(own_model, "KEY_MAP", capsys)
    assert len(rows) and set(rows["model"]) == {f"{MODULE}:build"}
    assert set(rows["status"]) == {OK}, list(rows["error"])
    assert {s["model"] for s in out["strategies"] if s["strategy"] == "pipelined"} == {
        f"{MODULE}:build"
    }
    wrong = ["--model", f"{MODULE}:build", "--key-map", f"{MODULE}:WRONG_KEY_MAP"]
    argv = ["bench", "run", "--checkpoint", str(own_model / "model.safetensors"), *wrong]
    assert main([*argv, "--out", str(own_model / "refused")]) == 2  # before anything runs
    err = capsys.readouterr().err.strip()
    assert "would not fill the model: dense.kernel: model expects shape (4, 3)" in err, err
    assert "loadbench plan" in err and len(err.splitlines()) == 1
    assert not (own_model / "refused").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "nowhere_module:build"], "no module 'nowhere_module' on the import path"),
        (["--model", "spec", "--key-map", f"{MODULE}:KEY_MAP"], "give one --model MODULE:NAME"),
        (["--model", f"{MODULE}:"], "expected MODULE:NAME"),
        (["--model", "port"], "your own model loads --checkpoint as --model MODULE:NAME"),
    ],
)
def test_bad_own_model_options_are_refused_in_one_line(own_model, argv, message, capsys):
    checkpoint = ["--checkpoint", str(own_model / "model.safetensors")]
    assert main(["bench", "run", *checkpoint, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
