"""A shaped link: a network namespace of this run's own, joined to the host by a veth pair whose
ends are shaped with `tc tbf` (a token bucket: the bandwidth).

`ShapedLink(Link.parse("1Gbit"))` as a context manager: the namespace `lb<pid>n<k>` and the veth
pair `lb<pid>h<k>` / `lb<pid>p<k>` are created with addresses from `10.233.<k>.0/30` (host end
`.1`, namespace end `.2`), used only on that pair; a server started inside (`netns=link.netns`,
`host=link.server_address`) is reached by the host over the shaped pair and by nothing else. On
exit (normal, an exception, Ctrl-C or SIGTERM) the namespace is deleted, which removes the pair.

A latency (`1Gbit/20ms`) needs `netem`; where the kernel lacks it (`CONFIG_NET_SCH_NETEM` unset)
the link is refused in one line, never faked. Not root, or no `ip`/`tc`: refused in one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from types import FrameType

from bench.errors import BenchError

_UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_LINK = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)(bit|bps)(?:/(\d+(?:\.\d+)?)ms)?$", re.I)
CMD_TIMEOUT_S = 10


@dataclass(frozen=True)
class Link:
    """A link's bandwidth (bits per second) and latency (ms; None: none asked)."""

    text: str
    bits_per_s: float
    latency_ms: float | None = None

    @classmethod
    def parse(cls, text: str) -> Link:
        """`1Gbit`, `10Gbit`, `500Mbit`, optionally `/20ms`; a one-line `BenchError` otherwise.

        Example:
            >>> Link.parse("1Gbit").bytes_per_s
            125000000.0
        """
        m = _LINK.match(text.strip())
        if not m:
            raise BenchError(f"--link {text!r}: give BANDWIDTH[/LATENCY], e.g. 1Gbit or 1Gbit/20ms")
        bits = float(m[1]) * _UNITS[m[2].lower()] * (8 if m[3].lower() == "bps" else 1)
        if bits <= 0:
            raise BenchError(f"--link {text!r}: the bandwidth must be above zero")
        return cls(text.strip(), bits, float(m[4]) if m[4] else None)

    @property
    def bytes_per_s(self) -> float:
        return self.bits_per_s / 8

    def ceiling_s(self, nbytes: int) -> float:
        """The shortest time `nbytes` can take over this link (bytes over bandwidth)."""
        return nbytes / self.bytes_per_s


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=CMD_TIMEOUT_S, check=check)


def can_shape() -> str | None:
    """None if this process can make a shaped link; else why not (one line)."""
    if os.geteuid() != 0:
        return "a shaped link needs root (a network namespace and tc); run as root or drop --link"
    missing = [c for c in ("ip", "tc") if shutil.which(c) is None]
    if missing:
        return f"a shaped link needs {' and '.join(missing)} (apt-get install iproute2)"
    return None


def netem_missing() -> bool:
    """True when the kernel has no netem (its config says so, or the module cannot load)."""
    release = os.uname().release
    for config in (f"/boot/config-{release}", "/proc/config.gz"):
        with contextlib.suppress(OSError):
            if config.endswith(".gz"):
                import gzip

                text = gzip.open(config, "rt").read()
            else:
                text = open(config, encoding="utf-8").read()
            return not re.search(r"^CONFIG_NET_SCH_NETEM=[ym]", text, re.M)
    return _run("modprobe", "-n", "sch_netem", check=False).returncode != 0


def _stale_namespaces() -> None:
    """Delete namespaces an earlier run of this tool left (its process is gone)."""
    out = _run("ip", "netns", "list", check=False).stdout
    for name in re.findall(r"^lb(\d+)n\d+", out, re.M):
        pid = int(name)
        if not os.path.exists(f"/proc/{pid}"):
            for ns in re.findall(rf"^(lb{pid}n\d+)", out, re.M):
                _run("ip", "netns", "del", ns, check=False)


def check_latency(link: Link) -> None:
    """A one-line `BenchError` where `link` asks a latency and the kernel has no netem."""
    if link.latency_ms is not None and netem_missing():
        raise BenchError(
            f"--link {link.text}: a latency needs netem, which this kernel lacks "
            "(CONFIG_NET_SCH_NETEM is not set); give the bandwidth alone, e.g. "
            f"--link {link.text.split('/')[0]}"
        )


class ShapedLink:
    """Context manager: this run's namespace and shaped veth pair (see the module docstring)."""

    _count = 0

    def __init__(self, link: Link) -> None:
        why = can_shape()
        if why:
            raise BenchError(why)
        check_latency(link)
        ShapedLink._count += 1
        pid, k = os.getpid(), ShapedLink._count
        self.link = link
        self.netns = f"lb{pid}n{k}"
        self.host_if, self.ns_if = f"lb{pid}h{k}"[:15], f"lb{pid}p{k}"[:15]
        octet = (pid * 7 + k) % 250 + 1
        self.host_address, self.server_address = f"10.233.{octet}.1", f"10.233.{octet}.2"
        self._old_term: object = None

    def __enter__(self) -> ShapedLink:
        _stale_namespaces()
        self._old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._create()
        except BaseException:
            self.remove()
            raise
        return self

    def _create(self) -> None:
        ns = ("ip", "netns", "exec", self.netns)
        try:
            _run("ip", "netns", "add", self.netns)
            _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _run("ip", "link", "set", self.ns_if, "netns", self.netns)
            _run("ip", "addr", "add", f"{self.host_address}/30", "dev", self.host_if)
            _run("ip", "link", "set", self.host_if, "up")
            _run(*ns, "ip", "addr", "add", f"{self.server_address}/30", "dev", self.ns_if)
            _run(*ns, "ip", "link", "set", self.ns_if, "up")
            _run(*ns, "ip", "link", "set", "lo", "up")
            rate = f"{int(self.link.bits_per_s)}bit"
            burst = str(max(256 << 10, int(self.link.bytes_per_s / 100)))  # 10 ms of the rate
            for prefix, dev in (((), self.host_if), (ns, self.ns_if)):
                where = "root"
                if self.link.latency_ms is not None:  # netem's delay, the bucket beneath it
                    delay = f"{self.link.latency_ms / 2:g}ms"  # each way: the round trip asked
                    _run(
                        *prefix,
                        *f"tc qdisc add dev {dev} root handle 1: netem delay {delay}".split(),
                    )
                    where = "parent 1: handle 2:"
                tbf = f"tc qdisc add dev {dev} {where} tbf rate {rate} burst {burst} latency 100ms"
                _run(*prefix, *tbf.split())
        except subprocess.CalledProcessError as e:
            raise BenchError(
                f"--link {self.link.text}: `{' '.join(e.cmd)}` failed: {e.stderr.strip()}"
            ) from None

    def remove(self) -> None:
        """Delete the namespace (and with it the veth pair); safe to call twice."""
        _run("ip", "netns", "del", self.netns, check=False)
        _run("ip", "link", "del", self.host_if, check=False)

    def __exit__(self, *exc: object) -> None:
        try:
            self.remove()
        finally:
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)  # type: ignore[arg-type]


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
