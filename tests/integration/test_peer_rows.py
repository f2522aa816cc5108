"""Every peer whose package is installed here is in `make bench`'s table: a default run plans it
(never skipped in silence), and its children measure an ok row with the peak split into anonymous
and file-backed memory and the load's CPU-seconds. A peer that only loads another model
(`MODELS`, e.g. `tunix`: `--model zoo`) is listed as skipped with that reason in a spec run."""

from __future__ import annotations

from bench.records.results import read_results
from bench.run.config import RunConfig
from bench.run.matrix import Checkpoint, plan
from bench.run.runner import run_bench
from bench.strategies import catalog
from loader.vocabulary import OK, PEER, TOTAL

PEERS = {name: info for name, info in catalog().items() if info.kind == PEER}
INSTALLED = sorted(name for name, info in PEERS.items() if info.available() and not info.models)


def test_the_jax_peers_are_installed_everywhere():
    """orbax's safetensors layout and the zoos' mmap-and-put need only loadbench's own packages,
    so no machine may skip them."""
    assert {"orbax-safetensors", "mmap-put"} <= set(INSTALLED)


def test_a_default_run_plans_every_installed_peer(tmp_path):
    config = RunConfig(shapes=["tiny-gpt2"], repeats=1, out=tmp_path, progress=False)
    ck = Checkpoint("tiny-gpt2", None, 0, str(tmp_path / "m.safetensors"), 453_864, 1 << 17, 64)
    tasks, skipped = plan(ck, list(catalog().values()), config, tmp_path)
    planned = {t.entry.name for t in tasks}
    reasons = {t.entry.name: reason for t, reason in skipped}
    for name in INSTALLED:
        assert name in planned, f"peer {name} is installed here but skipped: {reasons.get(name)}"
    for name, info in PEERS.items():
        if name not in planned:  # every other peer is listed, with why
            assert reasons.get(name), f"peer {name} is neither planned nor listed as skipped"
            if info.models:
                assert f"loads only --model {info.models[0]}" in reasons[name]


def test_every_installed_peer_measures_an_ok_row(tmp_path, monkeypatch, tmp_path_factory):
    monkeypatch.setenv("LOADBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "lbcache"))
    config = RunConfig(
        shapes=["tiny-gpt2"],
        strategies=INSTALLED,
        repeats=1,
        out=tmp_path / "results",
        progress=False,
        argv=["test"],
    )
    run_bench(config)
    phases = read_results(tmp_path / "results").phases
    totals = phases[phases["phase"] == TOTAL].set_index("strategy")
    for name in INSTALLED:
        assert name in totals.index, f"peer {name} is installed here but has no row"
        row = totals.loc[name]
        assert row["status"] == OK, f"{name}: {row['status']} {row['error']}"
        assert row["phase_peak_anon_rss_bytes"] > 0 and row["phase_peak_file_rss_bytes"] > 0
        assert row["cpu_s"] > 0
