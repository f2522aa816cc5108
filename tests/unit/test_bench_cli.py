"""The `loadbench` CLI's own parts: no jax in the parent, one-line errors, `bench list`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.cli import main
from bench.units import format_bytes, parse_size


def test_parent_modules_do_not_import_jax():
    code = (
        "import sys; import bench.run.runner, bench.records.results, bench.analysis.recommend, "
        "bench.cli, bench.analysis.summary; "
        "bad = sorted(m for m in ('jax', 'flax', 'memray') if m in sys.modules); print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_bench_list_json(capsys):
    assert main(["bench", "list", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    for e in entries:
        assert set(e) == {
            "name",
            "description",
            "kind",
            "checkpoint",
            "multiprocess",
            "install_hint",
            "available",
            "missing",
            "platforms",
            "unavailable",
            "default",
        }
        assert e["description"]
        assert e["available"] == (e["unavailable"] is None)
        assert not e["missing"] or not e["available"]
    assert [e["name"] for e in entries if e["default"]] == ["pipelined"]  # load_model's default
    main(["bench", "list"])
    marked = [line for line in capsys.readouterr().out.splitlines() if "(default)" in line]
    assert len(marked) == 1 and marked[0].startswith("pipelined (default)")


def test_bench_list_shows_unavailable_peers_with_the_install_command(capsys):
    from loader import strategies

    assert main(["bench", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("runai", "fastsafetensors", "instanttensor"):
        line = next(ln for ln in out.splitlines() if ln.startswith(name + " "))
        info = strategies.get(name)
        if info.available():
            assert "unavailable" not in line
        elif info.missing():
            assert "unavailable: needs" in line and "install with `make peers`" in line
        else:  # installed, but no device of its platform here (InstantTensor on a CPU host)
            assert "unavailable: needs a cuda device" in line


def test_project_errors_are_one_line(capsys, tmp_path):
    assert (
        main(
            [
                "bench",
                "run",
                "--shapes",
                "tiny-gpt2",
                "--strategies",
                "nope",
                "--out",
                str(tmp_path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("loadbench: error: unknown strategy 'nope'") and "Traceback" not in err
    assert (
        main(
            ["recommend", "--shapes", "tiny-gpt2", "--host-ram", "lots", "--results", str(tmp_path)]
        )
        == 2
    )
    assert "--host-ram 'lots': not a size" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "n"),
    [("4GiB", 4 << 30), ("4G", 4 << 30), ("4GB", 4 * 10**9), ("1.5 MiB", 3 << 19), ("123B", 123)],
)
def test_sizes(text, n):
    assert parse_size(text) == n


def test_format_bytes():
    assert format_bytes(3 << 30) == "3.00 GiB" and format_bytes(float("nan")) == "-"


def test_runner_catalog_stays_jax_free():
    code = (
        "import sys; from bench import strategies; strategies.catalog(); "
        "print('jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.startswith("loadbench ")


@pytest.mark.parametrize(
    "argv", [["shapes", "show", "sa4"], ["recommend", "--shapes", "sa4", "--host-ram", "4GiB"]]
)
def test_an_unknown_preset_is_one_line_with_a_suggestion_and_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'sa3'?" in err and "Presets: " in err


def test_a_text_file_is_called_not_a_safetensors_file(tmp_path, capsys):
    text = tmp_path / "README.md"
    text.write_text("# loadbench\n\nMeasure what it really costs to load a model.\n" * 4)
    assert main(["shapes", "inspect", str(text)]) == 2
    assert "not a safetensors file" in capsys.readouterr().err
