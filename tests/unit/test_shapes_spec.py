"""Shape specs: the shipped presets, the JSON format, name lookup and `shapes show`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import shapes
from shapes.cli import main
from shapes.spec import ShapeSpec, TensorSpec, spec_from_dict

REPO = Path(__file__).resolve().parents[2]

# (tensors, params, data bytes, files): the published figures that PROVENANCE.txt checks each list
# against.
EXPECTED = {
    "sa3": (685, 567_573_761, 2_270_295_044, 1),
    "sa3-medium": (997, 2_305_495_793, 9_221_983_172, 1),
    "gpt2": (160, 137_022_720, 548_090_880, 1),
    "tiny-gpt2": (64, 111_968, 447_872, 1),
    "llama3-8b": (291, 8_030_261_248, 16_060_522_496, 4),
    "tinyllama-1.1b": (201, 1_100_048_384, 2_200_096_768, 1),  # derived from its config.json
    "vit-base": (200, 86_567_656, 346_270_624, 1),
    "huge-tensor": (1, 1_073_741_824, 4_294_967_296, 1),  # synthetic: one tensor over any budget
    # quantized layouts (shapes/presets/README.md): derived from each repo's config and
    # quantization_config; their data bytes are what the published checkpoints weigh
    "llama3-8b-fp8": (515, 8_031_637_504, 9_086_705_664, 2),
    "llama3-8b-int4": (739, 1_977_881_024, 5_700_593_408, 2),
    "deepseek-v3-fp8-layers": (1621, 15_111_910_880, 16_969_604_992, 4),
    "gpt-oss-20b-mxfp4": (459, 11_956_805_184, 13_761_264_768, 3),
    "tiny-llama-fp8": (35, 1_447_168, 1_722_880, 1),
    "tiny-llama-int4": (49, 420_124, 1_135_216, 1),
    "tiny-deepseek-fp8": (69, 1_375_056, 1_640_256, 1),
    "tiny-gpt-oss-mxfp4": (41, 1_501_968, 2_168_352, 1),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_loads_with_published_counts(name):
    spec = shapes.load_spec(name)
    assert (len(spec.tensors), spec.total_params, spec.total_bytes, spec.file_count) == EXPECTED[
        name
    ]
    assert spec.provenance and spec.source
    assert sum(len(spec.tensors_in(f)) for f in spec.files) == len(spec.tensors)


def test_preset_names_match_the_issue():
    assert set(shapes.preset_names()) == set(EXPECTED)


def test_sa3_details():
    spec = shapes.load_spec("sa3")
    assert spec.median_numel == 1024
    assert spec.largest.numel == 8_388_608
    assert [t.name for t in spec.tensors if t.numel == 0] == [
        "pretransform.model.bottleneck.noise_scaling_factor"
    ]


def test_llama_is_bf16_in_four_shards():
    spec = shapes.load_spec("llama3-8b")
    assert spec.bytes_by_dtype == {"BF16": 16_060_522_496}
    assert [len(spec.tensors_in(f)) for f in spec.files] and all(
        spec.tensors_in(f) for f in spec.files
    )


def test_even_count_median_is_the_mean_of_the_middle_pair():
    assert shapes.load_spec("tiny-gpt2").median_numel == 64  # middle pair 32 and 96


def _tiny_spec(**kw) -> ShapeSpec:
    tensors = (
        TensorSpec("a.w", "F32", (2, 3), "m.safetensors"),
        TensorSpec("b", "I64", (0,), "m.safetensors"),
    )
    return ShapeSpec("org/x", None, ("m.safetensors",), tensors, "test", {"format": "pt"}, **kw)


def test_json_round_trip_and_dict_form(tmp_path):
    spec = _tiny_spec()
    path = tmp_path / "s.json"
    path.write_text(spec.to_json())
    assert shapes.load_spec(path) == spec
    as_dict = {
        "source": "org/x",
        "files": ["m.safetensors"],
        "provenance": "test",
        "metadata": {"format": "pt"},
        "tensors": {"a.w": {"dtype": "F32", "shape": [2, 3]}, "b": {"dtype": "I64", "shape": [0]}},
    }
    assert spec_from_dict(as_dict, where="dict") == spec


@pytest.mark.parametrize(
    "tensors, fragment",
    [
        ([{"name": "a", "dtype": "F99", "shape": [1]}], "unknown dtype"),
        ([{"name": "a", "dtype": "F32", "shape": [-1]}], "non-negative"),
        ([{"name": "a", "dtype": "F32", "shape": [1]}] * 2, "listed twice"),
        (
            [{"name": "a", "dtype": "F32", "shape": [1], "file": "other.safetensors"}],
            "not in files",
        ),
        ([{"name": "a", "shape": [1]}], "lacks a valid"),
    ],
)
def test_invalid_specs_are_refused(tensors, fragment):
    with pytest.raises(shapes.ShapesError, match=fragment):
        spec_from_dict({"files": ["m.safetensors"], "tensors": tensors}, where="t")


def test_unknown_name_lists_presets_and_fetched(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADBENCH_HOME", str(tmp_path))
    (tmp_path / "shapes").mkdir()
    (tmp_path / "shapes" / "org--x.json").write_text(_tiny_spec().to_json())
    with pytest.raises(shapes.UnknownSpecError) as info:
        shapes.load_spec("no-such-spec")
    assert "sa3" in str(info.value) and "org--x" in str(info.value)
    assert shapes.load_spec("org--x").name == "org--x"
    assert shapes.load_spec("org/x") == _tiny_spec()  # the repo id finds its default name


def test_show_json_in_process(capsys):
    assert main(["shapes", "show", "sa3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tensors"] == 685 and out["params"] == 567_573_761
    assert {"bytes", "largest_numel", "median_numel", "files"} <= set(out)
    assert (out["bytes"], out["largest_numel"], out["median_numel"], out["files"]) == (
        2_270_295_044,
        8_388_608,
        1024,
        1,
    )


def test_show_text_and_unknown_name(capsys):
    assert main(["shapes", "show", "llama3-8b"]) == 0
    text = capsys.readouterr().out
    assert "bytes BF16" in text and "8,030,261,248" in text
    assert main(["shapes", "show", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no shape spec named 'nope'" in err


def test_show_json_subprocess():
    proc = subprocess.run(
        [sys.executable, "-m", "shapes.cli", "shapes", "show", "sa3", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    out = json.loads(proc.stdout)
    assert (out["tensors"], out["params"]) == (685, 567_573_761)


@pytest.mark.parametrize(
    "file", ["../evil.safetensors", "/abs/x.safetensors", "a//b.safetensors", "x.bin"]
)
def test_file_names_must_stay_inside_the_checkpoint_folder(file):
    with pytest.raises(shapes.ShapesError, match="relative"):
        spec_from_dict(
            {"files": [file], "tensors": [{"name": "a", "dtype": "F32", "shape": [1]}]}, where="t"
        )


def test_show_text_reads_sizes_in_one_unit_family_and_says_nothing_of_a_missing_pin(capsys):
    """A small checkpoint is not "(0.00 GB)"; "largest" says it counts elements; no "@ unpinned"."""
    assert main(["shapes", "show", "tiny-gpt2"]) == 0
    out = capsys.readouterr().out
    assert "(437 KiB)" in out and "0.00 GB" not in out
    assert "(32,000 elements)" in out and "unpinned" not in out
    assert main(["shapes", "show", "gpt2"]) == 0
    assert "(523 MiB)" in capsys.readouterr().out
