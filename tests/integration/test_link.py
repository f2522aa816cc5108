"""Shaped links: a namespace and a tbf-shaped veth pair that a real nginx serves over, removed
afterwards (also after a failure); a latency refused where the kernel has no netem."""

from __future__ import annotations

import subprocess
import time

import pytest

from bench.errors import BenchError
from bench.link.shaping import Link, ShapedLink, can_shape

pytestmark = pytest.mark.timeout(60)
needs_shaping = pytest.mark.skipif(can_shape() is not None, reason=str(can_shape()))


def test_parse_and_ceiling():
    assert Link.parse("1Gbit").bytes_per_s == 125e6
    assert Link.parse("10Gbit").ceiling_s(1_250_000_000) == pytest.approx(1.0)
    assert Link.parse("500Mbit/20ms").latency_ms == 20
    with pytest.raises(BenchError, match="give BANDWIDTH"):
        Link.parse("fast")


def _leftovers(link: ShapedLink) -> str:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return "\n".join(
        line for line in (names + links).splitlines() if link.netns in line or link.host_if in line
    )


@needs_shaping
def test_a_shaped_link_caps_a_real_server_and_is_removed(tmp_path):
    import obstore
    from obstore.store import HTTPStore

    from bench.link.servers import start_nginx

    (tmp_path / "blob").write_bytes(bytes(10_000_000))
    link = Link.parse("200Mbit")
    with (
        ShapedLink(link) as shaped,
        start_nginx(tmp_path, host=shaped.server_address, netns=shaped.netns) as server,
    ):
        store = HTTPStore(server.url, client_options={"allow_http": True})
        t0 = time.perf_counter()
        n = len(obstore.get(store, "blob").bytes())
        took = time.perf_counter() - t0
    assert n == 10_000_000
    assert took >= 0.8 * link.ceiling_s(n)  # shaped: 0.4 s at 200 Mbit/s (loopback: ~10 ms)
    assert not _leftovers(shaped)


@needs_shaping
def test_removed_after_a_failure():
    with pytest.raises(RuntimeError), ShapedLink(Link.parse("1Gbit")) as shaped:
        assert (
            shaped.netns in subprocess.run(["ip", "netns"], capture_output=True, text=True).stdout
        )
        raise RuntimeError("boom")
    assert not _leftovers(shaped)


@needs_shaping
def test_a_latency_is_refused_without_netem():
    from bench.link.shaping import netem_missing

    if not netem_missing():
        pytest.skip("this kernel has netem")
    with pytest.raises(BenchError, match="needs netem.*CONFIG_NET_SCH_NETEM is not set"):
        ShapedLink(Link.parse("1Gbit/20ms"))
