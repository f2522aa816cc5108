"""Page-cache eviction and residency (cold runs): measured with mincore, on a real temp file."""

from __future__ import annotations

import os

import pytest

from bench.errors import BenchError
from bench.limits import pagecache


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes(os.urandom(4 << 20))
    return path


def test_warm_then_evict_drops_the_file(data_file):
    assert pagecache.warm([data_file]) > 0.9
    left = pagecache.evict([data_file])
    if left is not None and left > 0.5:  # e.g. a filesystem without its own page cache
        pytest.skip(f"this filesystem does not drop pages on DONTNEED ({left:.0%} still resident)")
    assert left < 0.1
    assert pagecache.warm([data_file]) > 0.9  # and reading brings it back: the probe can see both


def test_resident_fraction_is_byte_weighted_and_none_for_empty(tmp_path, data_file):
    empty = tmp_path / "empty.safetensors"
    empty.write_bytes(b"")
    assert pagecache.resident_fraction([empty]) is None
    pagecache.warm([data_file])
    assert pagecache.resident_fraction([empty, data_file]) == pytest.approx(1.0, abs=0.05)


def test_checkpoint_files_of_a_folder_and_an_index(tmp_path):
    (tmp_path / "a.safetensors").write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y")
    index = tmp_path / "model.safetensors.index.json"
    index.write_text("{}")
    names = [p.name for p in pagecache.checkpoint_files(index)]
    assert names == ["a.safetensors", "model.safetensors.index.json", "b"]
    assert pagecache.checkpoint_files(tmp_path / "a.safetensors") == [tmp_path / "a.safetensors"]


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(BenchError, match="nope.safetensors"):
        pagecache.checkpoint_files(tmp_path / "nope.safetensors")
    with pytest.raises(BenchError, match="cannot open it to evict"):
        pagecache.evict([tmp_path / "nope.safetensors"])


def test_growth_is_what_a_run_left_cached(data_file):
    cold = pagecache.set_cache([data_file], pagecache.COLD)
    if cold.resident_fraction is None or cold.resident_fraction > 0.1:
        pytest.skip("this filesystem does not drop pages on DONTNEED")
    assert pagecache.with_growth(cold, [data_file]).growth_bytes == pytest.approx(0, abs=1 << 16)
    data_file.read_bytes()  # the "load": through the page cache
    grown = pagecache.with_growth(cold, [data_file]).growth_bytes
    assert grown == pytest.approx(data_file.stat().st_size, rel=0.05)
    unmeasured = pagecache.CacheOutcome(pagecache.COLD)
    assert pagecache.with_growth(unmeasured, [data_file]).growth_bytes is None
