"""One rule for "faster", "lighter" and "too close to call", and the one sentence every view
prints of it: the bench summary, `recommend` (text and `--json`), the dashboard and the report.

A strategy is a `Candidate`: its time (a measured median, or a prediction) with a 95% interval
(`bench.intervals`: on a measured row, its paired ratio, wall over the same moment's
reference; on a prediction, the predicted seconds widened by the measured interval), and its peak
with the spread of its repeats.

- **Time.** Two candidates tie on time when their intervals overlap; otherwise the one whose
  interval lies lower is faster. A time with one repeat has no interval and ties with everything:
  one run cannot call two strategies apart.
- **Peak.** One is lighter only when its peak is lower by more than either's repeat spread (max -
  min over repeats) and more than `PEAK_TIE_FRACTION` of the lighter peak: two strategies that
  hold the model and nothing else differ by allocator noise, not by design.
- **The choice.** Among the candidates that fit, the fastest and those tied with it on time; of
  those the lightest (`lighter`), else the fastest. `Choice.sentence` says it with the figures:
  `pipelined (1.31 s; 2.36x ceiling, 95% CI 2.28-2.45x) ties on time with builder (1.35 s; ...):
  their intervals overlap; pipelined is lighter (2.31 GiB against 2.55 GiB, beyond their repeat
  spreads)`.
- **One run.** A candidate without an interval is not judged on time against any other: it is
  never said to tie (`Choice.unjudged`, not `Choice.ties`), and the sentence says `one run: not
  judged on time`; the pick among those that fit is then the lighter beyond the noise (memory is
  judged), else the shorter single run, said to be no verdict on time.
- **Peers.** Another project's loader (`loader.vocabulary.PEER`) is never one to use in one's own
  code. `with_peers` names the fastest peer that fits where it is faster than every one of
  loadbench's own the choice weighed, with what it costs (host RAM peak, device peak where
  measured), before the best of loadbench's own; where the choice left peers out, it says so.
No jax.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from bench.intervals import Interval
from shapes.sizes import format_bytes

#: Peaks nearer than this fraction of the lighter are as light, whatever their repeats show.
PEAK_TIE_FRACTION = 0.01
FASTER, SLOWER, TIE = "faster", "slower", "tie"
#: The unit a candidate's interval is in: its paired ratio (measured), or seconds (predicted).
PAIRED, SECONDS = "x ceiling", "s"


@dataclass(frozen=True)
class Candidate:
    """One strategy as the rule sees it.

    `seconds` is what the sentence quotes (a measured median, or a prediction); `time` is the
    95% interval the rule compares, in `unit` (PAIRED: the paired ratio; SECONDS); `peak_bytes`
    the median peak RSS and `peak_spread_bytes` its repeats' max - min (0 for a prediction);
    `unstable` says why its time is not to be trusted (`intervals.Instability.text`), if so;
    `device_peak_bytes` its device memory peak where a backend reported one (None: not measured).
    """

    strategy: str
    seconds: float
    time: Interval | None
    peak_bytes: float
    peak_spread_bytes: float = 0.0
    unit: str = PAIRED
    unstable: str | None = None
    device_peak_bytes: float | None = None

    @property
    def judged(self) -> bool:
        """Its time has an interval (2 or more repeats): it can be judged on time."""
        return self.time is not None and self.time.n >= 2

    @property
    def bounds(self) -> tuple[float, float]:
        """The time interval's (low, high); unbounded without an interval of 2 or more repeats."""
        if self.time is None or self.time.n < 2:
            return 0.0, math.inf
        return self.time.low, self.time.high

    @property
    def time_text(self) -> str:
        """`1.31 s; 2.36x ceiling, 95% CI 2.28-2.45x`, or `1.31 s, 95% CI 1.20-1.44 s` for a
        prediction, or `1.31 s, 1 run` (a measured row of one repeat, or a prediction fitted on
        one run per shape set: no interval)."""
        if self.time is None:
            return f"{self.seconds:.2f} s, no interval"
        if self.time.n < 2:
            return f"{self.seconds:.2f} s, 1 run"
        if self.unit == SECONDS:
            return f"{self.seconds:.2f} s, 95% CI {self.time.low:.2f}-{self.time.high:.2f} s"
        return (
            f"{self.seconds:.2f} s; {self.time.estimate:.2f}x ceiling, "
            f"95% CI {self.time.low:.2f}-{self.time.high:.2f}x"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of a candidate (`recommend --json`'s `ties`, the summary's JSON)."""
        low, high = self.bounds
        return {
            "strategy": self.strategy,
            "seconds": self.seconds,
            "time_unit": self.unit,
            "time_estimate": self.time.estimate if self.time else None,
            "time_low": low if math.isfinite(high) else None,
            "time_high": high if math.isfinite(high) else None,
            "repeats": self.time.n if self.time else 0,
            "peak_bytes": self.peak_bytes,
            "peak_spread_bytes": self.peak_spread_bytes,
            "unstable": self.unstable,
            "judged_on_time": self.judged,
            "device_peak_bytes": self.device_peak_bytes,
        }

    @property
    def costs_text(self) -> str:
        """`2.29 GiB host RAM peak and 2.12 GiB device peak` (the device's where measured)."""
        device = self.device_peak_bytes
        also = f" and {format_bytes(device)} device peak" if device is not None else ""
        return f"{format_bytes(self.peak_bytes)} host RAM peak{also}"


def time_order(a: Candidate, b: Candidate) -> str:
    """`a` against `b`: FASTER, SLOWER, or TIE where their intervals overlap."""
    (a_low, a_high), (b_low, b_high) = a.bounds, b.bounds
    if a_high < b_low:
        return FASTER
    if b_high < a_low:
        return SLOWER
    return TIE


def lighter(a: Candidate, b: Candidate) -> bool:
    """`a`'s peak is lower than `b`'s by more than either's repeat spread and more than
    `PEAK_TIE_FRACTION` of the lighter."""
    margin = max(a.peak_spread_bytes, b.peak_spread_bytes, PEAK_TIE_FRACTION * a.peak_bytes)
    return a.peak_bytes + margin < b.peak_bytes


#: How a peer is named: another project's loader, not one to call from one's own code.
PEER_TEXT = "a peer (another project's loader{})"
ONE_RUN = "one run: not judged on time"


@dataclass(frozen=True)
class Choice:
    """The candidate chosen, those tied with it on time, those not judged on time against it (one
    run: no interval), why it was chosen over them; and the peers beside it (`with_peers`)."""

    best: Candidate
    ties: list[Candidate] = field(default_factory=list)  # 95% intervals overlap the best's
    by_peak: bool = False  # among ties and unjudged: it is lighter than every one of them
    next_faster: Candidate | None = None  # without ties: the runner-up it was called apart from
    unjudged: list[Candidate] = field(default_factory=list)  # it or they have one run only
    fastest_peer: Candidate | None = None  # a peer faster than every one of ours weighed
    peers_left_out: tuple[str, ...] = ()  # peers that fit, left out of the choice
    peers_are_candidates: bool = False  # the choice weighed peers too (`recommend`)

    @property
    def judged_on_time(self) -> bool:
        """Every candidate weighed against the chosen one was judged on time (2+ repeats each)."""
        return not self.unjudged

    @property
    def own_sentence(self) -> str:
        """The choice among the candidates weighed, with its figures (no word of peers)."""
        best = self.best
        head = f"{best.strategy} ({best.time_text})"
        if not self.ties and not self.unjudged:
            if self.next_faster is None:
                return f"{head} is the only one to choose from"
            nxt = self.next_faster
            return (
                f"{head} is faster than {nxt.strategy} ({nxt.time_text}): their 95% intervals "
                "do not overlap"
            )
        said = []
        if self.ties:
            tied = ", ".join(f"{t.strategy} ({t.time_text})" for t in self.ties)
            said.append(f"ties on time with {tied}: their 95% intervals overlap")
        if self.unjudged:
            un = ", ".join(f"{t.strategy} ({t.time_text})" for t in self.unjudged)
            said.append(f"against {un}: {ONE_RUN}")
        text = f"{head} " + "; ".join(said)
        others = [*self.ties, *self.unjudged]
        if self.by_peak:
            peaks = ", ".join(format_bytes(t.peak_bytes) for t in others)
            how = "" if self.judged_on_time else ", so it is named on memory"
            return (
                f"{text}; {best.strategy} is lighter ({format_bytes(best.peak_bytes)} against "
                f"{peaks}, beyond their repeat spreads){how}"
            )
        if self.judged_on_time:
            return f"{text}; no peak is lighter beyond the repeat spreads, so the fastest is named"
        return (
            f"{text}; no peak is lighter beyond the repeat spreads, so the shortest single run is "
            "named (time was not judged)"
        )

    @property
    def peer_text(self) -> str | None:
        """`mmap-put (...), a peer (...), is the fastest that fits: it costs ...`, or None."""
        p = self.fastest_peer
        if p is None:
            return None
        left = "" if self.peers_are_candidates else ", left out of the choice"
        own = self.best
        if not (p.judged and own.judged):
            how = f" by its {'median' if p.judged else 'single run'} ({ONE_RUN})"
        elif p.unit != own.unit:
            how = " by its median"
        elif time_order(p, own) == TIE:
            how = f" by its median (its 95% interval overlaps {own.strategy}'s)"
        else:
            how = ""
        return (
            f"{p.strategy} ({p.time_text}), {PEER_TEXT.format(left)}, is the fastest that fits"
            f"{how}: it costs {p.costs_text}"
        )

    @property
    def sentence(self) -> str:
        """The one sentence every view prints of the choice, with its figures: the fastest peer
        first where one is faster than loadbench's own (and what it costs), then the choice."""
        said = self.own_sentence
        peer = self.peer_text
        if peer is not None:
            own = self.best
            return (
                f"{peer}; of loadbench's own strategies, use {own.strategy} ({own.costs_text}): "
                f"{said}"
            )
        if self.peers_left_out:
            said += f"; peers are left out of the choice ({', '.join(self.peers_left_out)})"
        return said

    def to_dict(self) -> dict[str, Any]:
        """`recommend --json`'s `choice`: best, ties (a list, empty where none), those not judged
        on time (one run), whether time was judged, the fastest peer (None: none faster), the
        peers left out, the sentence."""
        return {
            "best": self.best.to_dict(),
            "ties": [t.to_dict() for t in self.ties],
            "chosen_for_peak": self.by_peak,
            "judged_on_time": self.judged_on_time,
            "not_judged_on_time": [t.to_dict() for t in self.unjudged],
            "fastest_peer": self.fastest_peer.to_dict() if self.fastest_peer else None,
            "peers_left_out": list(self.peers_left_out),
            "sentence": self.sentence,
        }


def _centre(c: Candidate) -> float:
    return c.time.estimate if c.time is not None else c.seconds


def choose(candidates: Sequence[Candidate]) -> Choice | None:
    """The choice among `candidates` (those that fit, of one configuration, on one scale):
    the fastest and those tied with it (or not judged against it: one run); the lightest of them,
    else the fastest. None if empty.

    Example:
        >>> choose([pipelined, builder]).sentence
        'pipelined (1.31 s; 2.36x ceiling, 95% CI 2.28-2.45x) is faster than builder (...)...'
    """
    if not candidates:
        return None
    ordered = sorted(candidates, key=_centre)
    fastest = ordered[0]
    group = [c for c in ordered if c is fastest or time_order(fastest, c) == TIE]
    light = [c for c in group if all(c is o or lighter(c, o) for o in group)]
    best = light[0] if light and len(group) > 1 else fastest
    others = [c for c in group if c is not best]
    ties = [c for c in others if best.judged and c.judged]
    unjudged = [c for c in others if not (best.judged and c.judged)]
    runner_up = next((c for c in ordered if c is not best and c not in others), None)
    return Choice(
        best,
        ties,
        by_peak=bool(others) and bool(light),
        next_faster=runner_up,
        unjudged=unjudged,
    )


def with_peers(
    choice: Choice | None, peers: Sequence[Candidate], *, candidates: bool = False
) -> Choice | None:
    """`choice` (among loadbench's own) with `peers` (those that fit) beside it: the fastest
    peer named where its time is below every one of ours the choice weighed (by median, or by
    single run: the sentence says which); `candidates`: the peers were weighed too (`recommend`),
    else they are said to be left out of the choice."""
    if choice is None:
        return None
    weighed = [choice.best, *choice.ties, *choice.unjudged]
    ours = min(c.seconds for c in weighed)
    fastest = min(peers, key=lambda c: c.seconds, default=None)
    return replace(
        choice,
        fastest_peer=fastest if fastest is not None and fastest.seconds < ours else None,
        peers_left_out=() if candidates else tuple(sorted(p.strategy for p in peers)),
        peers_are_candidates=candidates,
    )
