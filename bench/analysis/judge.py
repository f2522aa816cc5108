"""The one judge: from a set of candidates and a target host, which strategy to use and why, as
one frozen record (`Decision`) that every surface renders: the bench summary, `bench run --json`,
`recommend` (text and `--json`), the dashboard's Overview and Target host pages and the report.
`bench.analysis.decision_words` words it; nothing here does.

The rule, stated once:

- **Candidates.** Every strategy that loaded ok, loadbench's own and peers alike (another
  project's loader, `loader.vocabulary.PEER`), whose peak fits the host's RAM with
  `TIGHT_FRACTION` (10%) to spare (`verdict`); the reference line never. Measured rows are judged
  one device count at a time (`judge` refuses a mix; the record says which count).
- **The measure ranked** (one, named in the record): the paired ratio (`PAIRED`: wall over a bare
  copy of the checkpoint timed beside each repeat) where every candidate carries one and its
  intervals are no wider than the wall times' (`paired_is_tighter`), else the wall time (`WALL`,
  t on the log walls; `Decision.paired_wider` says when paired ratios were there but wider); a
  prediction's predicted time (`PREDICTED`).
- **Ties** (`_tied`): two candidates tie on time where they are not different by the one rule
  for "different?" that `compare` and `history` use too (`bench.analysis.difference`: Welch's
  95% interval of the ratio of their times holds 1), asked of the 95% interval each candidate
  keeps of the measure (`time_difference`, by `difference_of_summaries`: the rows keep the
  interval, not the repeats, and it holds all that the test reads of them). Two intervals that
  overlap are not a tie where that ratio's interval leaves out 1. A prediction is judged the same
  way on the repeats its fit's interval was measured on (that module's doc says what that leaves
  out). A candidate of one run has no interval: it is not judged on time against any other
  (`Decision.unjudged`), never said to tie.
- **The pick.** The fastest by the measure, with those tied with it or not judged against it,
  form the group. One is lighter than another (`lighter`) by the same rule asked of the peaks
  (`peak_difference`: the 95% interval of the ratio of their peaks leaves out 1) and by more
  than `PEAK_TIE_FRACTION` (1%) of it. The group's lightest (`Decision.lightest`: those no other
  one of the group is lighter than) stay; they tie on time and on peak, so the order their
  medians came out in is noise, and a fixed order decides (`preference`: loadbench's default
  first, then the fewer host bytes its design holds, `HOST_BYTES_BY_DESIGN`, then the name).
  Where none of them is judged on time (one run), the fastest of them is named on memory.
  Never one that another tied is lighter than. `lighter_beyond`: the pick is lighter than every
  other of the group. Where a peer is picked, `own` holds the same judgement over loadbench's
  own.
- **Reasons** beside the pick: the candidates whose time is unstable, one run, a partial run,
  and the limits the rows ran under (`--cpus`, `--host-ram`, a disk read cap).

No jax.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from bench.analysis import difference
from bench.analysis.difference import MEMORY_MEASURE, Difference
from bench.analysis.predictions import StrategyPrediction
from bench.errors import BenchError
from bench.intervals import Interval, spread_text
from bench.records.results import Results, partial_runs
from bench.vocabulary import DOES_NOT_FIT, FITS, LIGHTER, OK, TIGHT
from loader.vocabulary import DEFAULT_STRATEGY, PEER, REFERENCE

#: Room a host must leave beside a peak for it to fit (a tighter fit is `TIGHT`).
TIGHT_FRACTION = 0.10
#: Peaks nearer than this fraction of the lighter are as light, whatever their repeats show.
PEAK_TIE_FRACTION = 0.01
#: Loadbench's strategies by the host bytes each holds by design, the fewest first: a bounded
#: budget in flight (pipelined; sharded's slices), one buffer a tensor that the device adopts
#: (zerocopy), a tensor at a time (builder, hostcast), a whole random model beside the reads
#: (pread, mmap), the whole file and model at once (eager). Where candidates tie on time and on
#: peak, this order decides after the default (`preference`); one not named here comes after.
HOST_BYTES_BY_DESIGN = (
    "pipelined",
    "sharded",
    "sharded-dir",
    "zerocopy",
    "builder",
    "hostcast",
    "pread",
    "mmap",
    "eager",
)
#: The measures a decision can rank by (`Decision.measure`).
PAIRED, WALL, PREDICTED = "paired ratio", "wall time", "predicted time"
#: The reasons a decision carries beside its pick (`Decision.reasons`).
UNSTABLE, ONE_RUN_REASON, PARTIAL, CONFIGURATION = "unstable", "one run", "partial", "configuration"


def verdict(peak: int, host_ram: int) -> str:
    """`fits`, `tight` (under 10% of `host_ram` to spare) or `does not fit`, for a peak RSS."""
    headroom = host_ram - peak
    if headroom < 0:
        return DOES_NOT_FIT
    return TIGHT if headroom < TIGHT_FRACTION * host_ram else FITS


@dataclass(frozen=True)
class Candidate:
    """One strategy as the judge sees it.

    `seconds` is its time (a measured median, or a prediction); `time` the 95% interval of the
    measure ranked (a paired ratio, or seconds), None or of one repeat where there is none;
    `peak_bytes` its median peak RSS and `peak_spread_bytes` its repeats' max - min, `peak` the
    95% interval of its peaks (None: read from the spread, or exact: a prediction's);
    `device_peak_bytes` its device memory peak where measured or predicted; `unstable` why its
    time is not to be trusted (None: it is); `peer`: another project's loader.
    """

    strategy: str
    seconds: float
    time: Interval | None
    peak_bytes: float
    peak_spread_bytes: float = 0.0
    unstable: str | None = None
    device_peak_bytes: float | None = None
    peer: bool = False
    peak: Interval | None = None

    @property
    def judged(self) -> bool:
        """Its time has an interval (2 or more repeats): it can be judged on time."""
        return self.time is not None and self.time.n >= 2

    @property
    def centre(self) -> float:
        """What it is ranked by: the measure's estimate (its seconds without an interval)."""
        return self.time.estimate if self.time is not None else self.seconds

    def to_json(self) -> dict[str, Any]:
        """The JSON object of a candidate: `unstable` is true or false, never null."""
        judged = self.judged and self.time is not None
        return {
            "strategy": self.strategy,
            "peer": self.peer,
            "seconds": self.seconds,
            "estimate": self.centre,
            "low": self.time.low if judged and self.time else None,
            "high": self.time.high if judged and self.time else None,
            "repeats": self.time.n if self.time else 0,
            "judged_on_time": self.judged,
            "peak_bytes": self.peak_bytes,
            "peak_spread_bytes": self.peak_spread_bytes,
            "device_peak_bytes": self.device_peak_bytes,
            "unstable": self.unstable is not None,
            "unstable_why": self.unstable,
        }


def time_difference(base: Candidate, new: Candidate) -> Difference:
    """NEW's time against BASE's by the one rule for "different?" (`bench.analysis.difference`),
    from the interval each keeps of the measure: no call (UNDECIDED) where either has one run.

    Example:
        >>> a = Candidate("a", 2.36, interval([2.30, 2.36, 2.42]), peak_bytes=1 << 30)
        >>> b = Candidate("b", 2.56, interval([2.50, 2.56, 2.62]), peak_bytes=1 << 30)
        >>> time_difference(a, b).text()  # their 95% intervals overlap; the ratio's does not hold 1
        '1.08x slower (95% CI 1.03-1.15)'
    """
    return difference.difference_of_summaries(_time_of(base), _time_of(new))


def _time_of(c: Candidate) -> Interval:
    """The candidate's interval of the measure; one repeat of its seconds where it keeps none."""
    return c.time if c.time is not None else Interval(c.seconds, c.seconds, c.seconds, 1)


def _tied(a: Candidate, b: Candidate) -> bool:
    """`a` and `b` tie on time: not different by the one rule (`time_difference`: Welch's 95%
    interval of the ratio of their times holds 1).

    Raises:
        ValueError: either has one run (no interval): it is not judged on time, never tied.
    """
    for side in (a, b):
        if not side.judged:
            raise ValueError(
                f"{side.strategy} ({_time_of(side).text()}): a tie needs 2 or more repeats a "
                "side; a candidate of one run is not judged on time (`Decision.unjudged`)"
            )
    return not time_difference(a, b).different


#: Where a candidate keeps no interval of its peak (rows of older files), its repeats' range
#: either side of its median is read as a 95% interval of this many repeats (near normal).
_RANGE_AS_REPEATS = 1000


def _peak_of(c: Candidate) -> Interval:
    """The candidate's interval of its peak; else its repeats' range either side of its median
    read as one (`_RANGE_AS_REPEATS`); an exact one (no width) where it has no spread either: a
    predicted peak has no repeats to spread."""
    if c.peak is not None and c.peak.n >= 2:
        return c.peak
    p, spread = c.peak_bytes, c.peak_spread_bytes
    if spread > 0 and p > spread:
        return Interval(p, p - spread, p + spread, _RANGE_AS_REPEATS)
    return Interval(p, p, p, 2)


def peak_difference(base: Candidate, new: Candidate) -> Difference:
    """NEW's peak against BASE's by the one rule for "different?" (`bench.analysis.difference`,
    as `compare` and `history` judge peaks).

    Example:
        >>> peak_difference(zerocopy, pipelined).text()
        'same (1.00x, 95% CI 0.99-1.01)'
    """
    return difference.difference_of_summaries(_peak_of(base), _peak_of(new), measure=MEMORY_MEASURE)


def lighter(a: Candidate, b: Candidate) -> bool:
    """`a`'s peak is lighter than `b`'s by the one rule (`peak_difference`), and by more than
    `PEAK_TIE_FRACTION` of it: the whole interval of a / b lies below 1 / 1.01.

    Example:
        >>> lighter(Candidate("a", 1.0, None, 700 << 20), Candidate("b", 1.0, None, 800 << 20))
        True
    """
    found = peak_difference(b, a)
    return found.direction == LIGHTER and found.beyond(1 + PEAK_TIE_FRACTION)


def preference(name: str) -> tuple[int, int, str]:
    """The fixed order that decides among candidates tied on time and on peak: loadbench's
    default (`DEFAULT_STRATEGY`) first, then the fewer host bytes by design
    (`HOST_BYTES_BY_DESIGN`), then the name; never whichever median came out ahead.

    Example:
        >>> sorted(["zerocopy", "builder", "pipelined"], key=preference)
        ['pipelined', 'zerocopy', 'builder']
    """
    base = name.split(" (")[0]  # `sharded (2 processes)` is sharded's
    design = len(HOST_BYTES_BY_DESIGN)
    if base in HOST_BYTES_BY_DESIGN:
        design = HOST_BYTES_BY_DESIGN.index(base)
    return (base != DEFAULT_STRATEGY, design, name)


@dataclass(frozen=True)
class TargetHost:
    """The host a decision is for: its RAM (None: unknown) and the device count judged."""

    ram_bytes: int | None
    devices: int | None = None


@dataclass(frozen=True)
class Decision:
    """Which strategy to use on a host, and why: the record every surface renders.

    `candidates` are those that fit, ranked by `measure` (the fastest first); `pick` the one to
    use (None: none fits, or none loaded ok: `loaded_ok`); `tied` those tied with it on time,
    `unjudged` those not judged against it (one run), `runner_up` the next one called apart from
    it (where nothing ties); `lightest` the pick and those of the group as light as it (none of
    the group lighter by `lighter`), of which `preference` named the pick; `lighter_beyond`: the
    pick is lighter than every other of the group. `own` is the same
    judgement over loadbench's own strategies where a peer is picked. `limits` are the limits the
    rows ran under (`("--cpus 1",)`), `partial` the runs that lost strategies or repeats, `lost`
    what they lost in a few words each (`hostcast`, `a repeat of zerocopy`). No words of a
    sentence: `bench.analysis.decision_words` gives those.
    """

    host: TargetHost
    measure: str
    candidates: tuple[Candidate, ...] = ()
    pick: str | None = None
    tied: tuple[str, ...] = ()
    unjudged: tuple[str, ...] = ()
    runner_up: str | None = None
    lightest: tuple[str, ...] = ()
    lighter_beyond: bool = False
    own: Decision | None = None
    not_fitting: tuple[str, ...] = ()
    loaded_ok: bool = True
    limits: tuple[str, ...] = ()
    partial: tuple[str, ...] = ()
    lost: tuple[str, ...] = ()
    paired_wider: bool = False  # ranked by WALL: the rows' paired ratios were the wider measure
    devices_asked: int | None = None  # the count asked where no row here used it (`host.devices`)

    def candidate(self, name: str | None) -> Candidate | None:
        """The candidate of that name (None: not among those that fit)."""
        return next((c for c in self.candidates if c.strategy == name), None)

    @property
    def picked(self) -> Candidate | None:
        """The picked candidate (None: none)."""
        return self.candidate(self.pick)

    @property
    def weighed(self) -> tuple[Candidate, ...]:
        """The pick and those it was weighed against on memory (tied, or not judged on time)."""
        names = {self.pick, *self.tied, *self.unjudged}
        return tuple(c for c in self.candidates if c.strategy in names)

    @property
    def unstable(self) -> tuple[str, ...]:
        """The candidates whose time is unstable, in rank order."""
        return tuple(c.strategy for c in self.candidates if c.unstable)

    @property
    def alone(self) -> bool:
        """The pick is the only strategy measured here: no other fits, none is left out for
        not fitting (a run of one strategy, or the others failed)."""
        return len(self.candidates) == 1 and not self.not_fitting

    @property
    def judged_on_time(self) -> bool:
        """Every candidate weighed against the pick has an interval (2+ repeats)."""
        return not self.unjudged and all(c.judged for c in self.weighed)

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the pick may not hold: `UNSTABLE`, `ONE_RUN_REASON`, `PARTIAL`, `CONFIGURATION`."""
        said = [
            (UNSTABLE, bool(self.unstable)),
            (ONE_RUN_REASON, self.pick is not None and not self.judged_on_time),
            (PARTIAL, bool(self.partial)),
            (CONFIGURATION, bool(self.limits)),
        ]
        return tuple(reason for reason, present in said if present)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON (`recommend --json`'s and `bench run --json`'s `decision`)."""
        return {
            "host_ram_bytes": self.host.ram_bytes,
            "devices": self.host.devices,
            "measure": self.measure,
            "paired_wider": self.paired_wider,
            "pick": self.pick,
            "peer_picked": bool(self.picked and self.picked.peer),
            "tied": list(self.tied),
            "not_judged_on_time": list(self.unjudged),
            "judged_on_time": self.judged_on_time,
            "runner_up": self.runner_up,
            "lightest": list(self.lightest),
            "lighter_beyond_spreads": self.lighter_beyond,
            "candidates": [c.to_json() for c in self.candidates],
            "not_fitting": list(self.not_fitting),
            "loaded_ok": self.loaded_ok,
            "unstable": list(self.unstable),
            "limits": list(self.limits),
            "partial": list(self.partial),
            "lost": list(self.lost),
            "devices_asked": self.devices_asked,
            "reasons": list(self.reasons),
            "own": self.own.to_json() if self.own is not None else None,
        }


def decide(
    candidates: Sequence[Candidate],
    host: TargetHost,
    measure: str,
    *,
    not_fitting: Sequence[str] = (),
    limits: Sequence[str] = (),
    partial: Sequence[str] = (),
    lost: Sequence[str] = (),
) -> Decision:
    """The decision among `candidates` (those that fit, of one configuration, on one measure).

    Example:
        >>> decide([pipelined, zerocopy, mmap_put], TargetHost(16 << 30, 1), PAIRED).pick
        'zerocopy'
    """
    ranked = tuple(sorted(candidates, key=lambda c: (c.centre, c.strategy)))
    empty = Decision(
        host,
        measure,
        ranked,
        not_fitting=tuple(not_fitting),
        limits=tuple(limits),
        partial=tuple(partial),
        lost=tuple(lost),
    )
    if not ranked:
        return empty
    fastest = ranked[0]
    group = [
        c for c in ranked if c is fastest or not (c.judged and fastest.judged) or _tied(c, fastest)
    ]
    light = [c for c in group if not any(lighter(o, c) for o in group if o is not c)]
    tied = [c for c in light if c.judged and fastest.judged]  # on time and on peak
    best = min(tied, key=lambda c: preference(c.strategy)) if tied else light[0]
    others = [c for c in group if c is not best]
    rest = [c for c in ranked if c not in group]
    decision = replace(
        empty,
        pick=best.strategy,
        tied=tuple(c.strategy for c in others if c.judged and best.judged),
        unjudged=tuple(c.strategy for c in others if not (c.judged and best.judged)),
        runner_up=rest[0].strategy if rest and not others else None,
        lightest=tuple(c.strategy for c in light) if others else (),
        lighter_beyond=bool(others) and all(lighter(best, o) for o in others),
    )
    if not best.peer:
        return decision
    own = decide([c for c in ranked if not c.peer], host, measure)
    return replace(decision, own=own if own.pick else None)


# -- measured rows ---------------------------------------------------------------------------------


def _number(row: pd.Series, key: str) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def row_candidate(row: pd.Series, measure: str) -> Candidate:
    """A summary row (`bench.records.results.summarize`) as a candidate on `measure`: its paired
    ratio's interval (`PAIRED`), else its wall time's. Either interval is t on the logarithms of
    the repeats, around their geometric mean: that mean is the estimate ranked and tested
    (`time_difference`), as `compare` tests the repeats; for the walls it is the interval's
    centre on the log scale, since the row's `wall_s` is the median (its `seconds`)."""
    wall = float(row["wall_s"])
    if measure == PAIRED:
        estimate = _number(row, "paired_ratio") or wall
        n = int(_number(row, "paired_n") or 1)
        low, high = _number(row, "paired_low"), _number(row, "paired_high")
    else:
        low, high = _number(row, "wall_low"), _number(row, "wall_high")
        estimate = math.sqrt(low * high) if low is not None and high is not None else wall
        n = int(_number(row, "ok_repeats") or 1) if low is not None else 1
    time = Interval(estimate, low or estimate, high or estimate, n if low is not None else 1)
    peak = float(row["peak_rss_bytes"])
    spread = (_number(row, "peak_rss_max") or peak) - (_number(row, "peak_rss_min") or peak)
    peak_low, peak_high = _number(row, "peak_low"), _number(row, "peak_high")
    peaks = int(_number(row, "ok_repeats") or 1)
    peak_iv = (
        Interval(math.sqrt(peak_low * peak_high), peak_low, peak_high, peaks)
        if peak_low is not None and peak_high is not None and peaks >= 2
        else None
    )
    unstable = row.get("unstable")
    return Candidate(
        strategy=str(row["strategy"]),
        seconds=wall,
        time=time,
        peak_bytes=peak,
        peak_spread_bytes=spread,
        unstable=unstable if isinstance(unstable, str) and unstable else None,
        device_peak_bytes=_number(row, "device_peak_bytes"),
        peer=row.get("kind") == PEER,
        peak=peak_iv,
    )


def loaded(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows that loaded a model ok (a median wall and peak), the reference line left out."""
    if rows.empty:
        return rows
    wall, peak = pd.to_numeric(rows["wall_s"]), pd.to_numeric(rows["peak_rss_bytes"])
    return rows[(rows["kind"] != REFERENCE) & wall.notna() & peak.notna()]


def flag_size(n: float) -> str:
    """A size as its flag is written: `64MiB`, `1.5GiB`, `4GiB` (three significant digits).

    Example:
        >>> flag_size(64 << 20), flag_size(3 << 29)
        ('64MiB', '1.5GiB')
    """
    unit, size = next(
        ((u, s) for u, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)) if n >= s),
        ("B", 1),
    )
    return f"{n / size:.3g}{unit}"


#: Row fields that say a limit the children ran under, and how each is said.
LIMITS = (
    ("cpus", lambda v: f"--cpus {v:g}"),
    ("host_ram_bytes", lambda v: f"--host-ram {flag_size(v)}"),
    ("disk_read_bytes_per_s", lambda v: f"--disk-read-speed {v / 1e6:.0f}MB/s"),
    ("budget_bytes", lambda v: f"--budget {flag_size(v)}"),
)


def limits_of(results: Results, run_ids: Collection[str]) -> tuple[str, ...]:
    """The limits the runs `run_ids` ran their children under (`("--cpus 1",)`), each said
    once; () for none."""
    phases = results.phases[results.phases["run_id"].isin(set(run_ids))]
    runs = results.runs[results.runs["run_id"].isin(set(run_ids))]
    said = []
    for column, text in LIMITS:
        # a run record holds what was asked; its rows also carry a strategy's default budget
        asked = runs if column in runs else phases
        if column not in asked:
            continue
        for value in sorted(set(pd.to_numeric(asked[column]).dropna())):
            said.append(text(float(value)))
    return tuple(said)


def judge(rows: pd.DataFrame, host: TargetHost, results: Results | None = None) -> Decision:
    """The decision over measured summary rows (`bench.records.results.summarize`) of one
    configuration, one device count, on `host`: the candidates that fit its RAM, ranked by the
    paired ratio where every one carries it, else by wall time. With the `results` the rows were
    summarized from, the record carries the limits their runs ran under and the lines of those
    runs that lost strategies (`partial_runs`).

    Example:
        >>> sentence(judge(summarize(results.phases), TargetHost(16 << 30), results))
        'use zerocopy on 16.0 GiB, 1 device (ranked by x ceiling (...), ...): ...'

    Raises:
        BenchError: the rows mix device counts (judge each count's rows apart).
    """
    counts = sorted({int(d) for d in rows["devices"].dropna()}) if "devices" in rows else []
    if len(counts) > 1:
        raise BenchError(
            f"rows of {', '.join(map(str, counts))} devices: a decision is for one device count; "
            "judge each count's rows apart"
        )
    host = TargetHost(host.ram_bytes, counts[0] if counts else host.devices)
    runs = set(rows["run_id"]) if "run_id" in rows else set()
    limits = limits_of(results, runs) if results is not None else ()
    partial = partial_of(results, runs) if results is not None else ()
    lost = lost_of(results, runs) if results is not None else ()
    ok = loaded(rows)
    if ok.empty or host.ram_bytes is None:
        return Decision(
            host, WALL, loaded_ok=not ok.empty, limits=limits, partial=partial, lost=lost
        )
    ram = host.ram_bytes
    fits = [verdict(int(p), ram) == FITS for p in pd.to_numeric(ok["peak_rss_bytes"])]
    fitting = ok[pd.Series(fits, index=ok.index, dtype=bool)]
    paired = pd.to_numeric(fitting.get("paired_n", pd.Series(0, index=fitting.index)))
    all_paired = len(fitting) > 0 and bool((paired.fillna(0) > 0).all())
    measure = PAIRED if all_paired and paired_is_tighter(fitting) else WALL
    decision = decide(
        [row_candidate(r, measure) for _, r in fitting.iterrows()],
        host,
        measure,
        not_fitting=[str(s) for s in ok.loc[~ok.index.isin(fitting.index), "strategy"]],
        limits=limits,
        partial=partial,
        lost=lost,
    )
    return replace(decision, paired_wider=all_paired and measure == WALL)


def paired_is_tighter(rows: pd.DataFrame) -> bool:
    """Whether the rows' paired ratios are at least as tight a measure as their wall times: the
    median, over the rows with an interval of both, of each interval's width on the log scale.
    Pairing each repeat with a bare copy timed beside it takes the machine's drift out of the
    comparison; where that copy moved more than the loads did (on a TPU host: a 0.2-0.3 s
    reference beside 1-7 s loads, whose walls repeated within 1%), it puts noise in instead, and
    the interleaved walls are the better measure. True where no row has both intervals."""
    paired, walls = [], []
    for _, row in rows.iterrows():
        p = _log_width(_number(row, "paired_low"), _number(row, "paired_high"))
        w = _log_width(_number(row, "wall_low"), _number(row, "wall_high"))
        if p is not None and w is not None:
            paired.append(p)
            walls.append(w)
    return not paired or statistics.median(paired) <= statistics.median(walls)


def _log_width(low: float | None, high: float | None) -> float | None:
    if low is None or high is None or low <= 0 or high <= 0:
        return None
    return math.log(high / low)


def default_devices(rows: pd.DataFrame) -> int | None:
    """The device count judged where none is asked: the one with the most strategies measured,
    the fewer devices among equals (None: no rows)."""
    if rows.empty:
        return None
    counts = rows.groupby("devices")["strategy"].nunique()
    most = {int(d): int(n) for d, n in zip(counts.index.to_numpy(), counts, strict=True)}
    return min(most, key=lambda d: (-most[d], d))


# -- predictions ----------------------------------------------------------------------------------


def prediction_candidate(s: StrategyPrediction, peers: Collection[str] = ()) -> Candidate:
    """A prediction as a candidate: its predicted seconds with the interval its fit measured on
    its largest shape set (relative), unstable where that interval is wider than +-5%. The
    interval keeps those repeats' count, so a tie between predictions is Welch's test on their
    noise (n - 1 degrees of freedom each side); the fit's error in extrapolating is not in it."""
    m, wall = s.model, s.predicted_wall_s
    time = Interval(
        wall, wall * m.wall_interval_low, wall * m.wall_interval_high, m.wall_interval_repeats
    )
    unsettled = time.n >= 2 and not time.settled
    why = (
        f"unstable: 95% CI {spread_text(time.half_width)} after {time.n} repeats of its largest "
        "shape set (wanted ±5%)"
        if unsettled
        else None
    )
    device = float(s.device.device_peak_bytes) if s.device else None
    return Candidate(
        s.strategy,
        wall,
        time,
        float(s.predicted_peak_bytes),
        unstable=why,
        device_peak_bytes=device,
        peer=s.strategy in peers,
    )


def judge_predictions(
    predictions: Sequence[StrategyPrediction],
    host: TargetHost,
    peers: Collection[str] = (),
    *,
    partial: Sequence[str] = (),
    lost: Sequence[str] = (),
    limits: Sequence[str] = (),
) -> Decision:
    """The decision over predictions on `host`: those whose verdict fits, ranked by their
    predicted time (`PREDICTED`); `partial`, `lost` and `limits` say of the runs fitted on what
    `judge` says of measured ones."""
    fits = [s for s in predictions if s.verdict == FITS]
    return decide(
        [prediction_candidate(s, peers) for s in fits],
        host,
        PREDICTED,
        not_fitting=[s.strategy for s in predictions if s.verdict != FITS],
        partial=partial,
        lost=lost,
        limits=limits,
    )


@dataclass(frozen=True)
class RankingCheck:
    """Pairs (faster, slower) as predicted: those called apart, and those too close to call;
    `reversed`: the called pairs whose measured times came out the other way round."""

    called: list[tuple[str, str]]
    too_close: list[tuple[str, str]]
    reversed: list[tuple[str, str]]

    @property
    def held(self) -> bool:
        """Every pair the prediction called apart was measured in its predicted order."""
        return not self.reversed


def check_ranking(
    predictions: list[StrategyPrediction], measured_wall_s: Mapping[str, float]
) -> RankingCheck:
    """Hold the measured times against each pair of predictions (strategies measured only):
    a pair is called apart where the judge's `_tied` does not tie it (the one rule for
    "different?"); a pair with a prediction of one run is too close to call."""
    timed = sorted(
        (s for s in predictions if s.strategy in measured_wall_s),
        key=lambda s: s.predicted_wall_s,
    )
    called, close, wrong = [], [], []
    for fast, slow in itertools.combinations(timed, 2):
        pair = (fast.strategy, slow.strategy)
        a, b = prediction_candidate(fast), prediction_candidate(slow)
        if not (a.judged and b.judged) or _tied(a, b):
            close.append(pair)
            continue
        called.append(pair)
        if measured_wall_s[fast.strategy] > measured_wall_s[slow.strategy]:
            wrong.append(pair)
    return RankingCheck(called, close, wrong)


def partial_of(results: Results, run_ids: Collection[str]) -> tuple[str, ...]:
    """The lines of `partial_runs` for the runs `run_ids` (those behind a decision's rows), then
    one per strategy that kept fewer repeats than its run asked (`lost_repeats`)."""
    runs = results.runs[results.runs["run_id"].isin(set(run_ids))]
    short = [
        f"run {run}: {strategy} kept {kept} of {asked} repeats"
        for run, strategy, kept, asked in lost_repeats(results, runs)
    ]
    return (*partial_runs(replace(results, runs=runs)), *short)


def lost_of(results: Results, run_ids: Collection[str]) -> tuple[str, ...]:
    """What the runs `run_ids` lost, a few words each, as the sentence names it: a strategy no
    run measured (`hostcast`), or `a repeat of zerocopy`.

    Example:
        >>> lost_of(results, {"r1"})
        ('hostcast', 'a repeat of zerocopy')
    """
    runs = results.runs[results.runs["run_id"].isin(set(run_ids))]
    phases = results.phases
    names: list[str] = []
    for _, run in runs.iterrows():
        asked = run["strategies"] if isinstance(run.get("strategies"), list) else []
        mine = phases["run_id"] == run["run_id"]
        gone = set(asked) - set(phases.loc[mine, "strategy"])
        gone -= set(phases.loc[~mine & (phases["status"] == OK), "strategy"])
        names += sorted(gone)
    names += [f"a repeat of {strategy}" for _, strategy, _, _ in lost_repeats(results, runs)]
    return tuple(dict.fromkeys(names))


def lost_repeats(results: Results, runs: pd.DataFrame) -> list[tuple[str, str, int, int]]:
    """(run, strategy, repeats kept, repeats asked) for each strategy of these `runs` with fewer
    repeats recorded than its run asked (`RunRecord.repeats`), every one of them ok: a line
    lost, or the run stopped between repeats (a strategy that failed says so in its rows).

    Example:
        >>> lost_repeats(results, results.runs)
        [('r1', 'zerocopy', 2, 3)]
    """
    found: list[tuple[str, str, int, int]] = []
    phases = results.phases
    if phases.empty or "repeats" not in runs:
        return found
    for _, run in runs.iterrows():
        asked = _number(run, "repeats")
        if asked is None:
            continue
        mine = phases[(phases["run_id"] == run["run_id"]) & (phases["kind"] != REFERENCE)]
        keys = [k for k in ("shapes", "strategy", "devices", "cache") if k in mine]
        for key, rows in mine.groupby(keys, dropna=False):
            n = rows["result_id"].nunique()
            if n < asked and (rows["status"] == OK).all():  # a failure is said as one
                strategy = str(dict(zip(keys, key, strict=True))["strategy"])
                found.append((str(run["run_id"]), strategy, int(n), int(asked)))
    return found


def host_ram(results: Results, run_ids: Collection[str]) -> int | None:
    """The RAM the runs' children had: their `--host-ram` limit where set, else the machine's
    (None: no run record)."""
    runs = results.runs[results.runs["run_id"].isin(set(run_ids))]
    if runs.empty:
        return None
    limits = pd.to_numeric(runs["host_ram_bytes"]).dropna()
    if len(limits):
        return int(limits.min())
    return int(pd.to_numeric(runs["ram_bytes"]).min())
