"""What the remote runs say about a link: the concurrency it wants, and a load over another link.

The rows are the ok whole-run rows of a remote load (`bench run --source http|s3|hf --link BW`)
over a shaped link; an unshaped loopback run has no bandwidth to hold its time against, so it
answers neither question.

- `concurrency_curves`: per source, link, shape set, strategy and process count, the median wall
  per measured
  `--remote-concurrency` value. The link wants the fastest; values whose repeats (min-max) overlap
  the fastest's are too close to call; the default's (`loader.remote`'s `DEFAULT_CONCURRENCY`)
  place is its rank on the curve and its time over the fastest's.
- `predict_link`: a load over a link that was not measured. Over a link a load takes its bytes
  over the bandwidth (`ceiling_s`) times what the client and the CPU lose beside it (the
  measured `x ceiling`, wall / ceiling_s). That loss depends on the bandwidth (on a fast link the
  CPU becomes the limit), so it is taken from the measured link closest in bandwidth (by ratio),
  at that link's fastest concurrency, never averaged over links:
  `wall = x ceiling there * target bytes / this link's bandwidth`. Beyond the fastest link
  measured the CPU may set the time instead, so such a prediction is said to be a lower bound.
  The host peak is the median baseline plus the measured peak over baseline per checkpoint byte
  times the target's bytes (the ratio `bench run` prints as `x ckpt`). A multi-process load
  (`sharded` as 2 or 4 processes) is its own strategy here, per process count; its bytes over the
  link are its processes' shares (per checkpoint byte, as measured) plus their headers, and its
  peak is every process's together. A checkpoint under
  `MIN_FIT_BYTES` spends its time on per-load overhead rather than the link: a prediction from
  one says so.

One implementation for `recommend --link` and the dashboard's Target host page; no jax.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, cast

import pandas as pd

from bench.analysis.recommend import MIN_FIT_BYTES, verdict
from bench.analysis.shares import process_label
from bench.errors import NoResultsError
from bench.link import FILE_SOURCE, UNSHAPED
from bench.link.shaping import Link
from bench.records.results import Results, headline
from bench.units import format_bytes, format_seconds
from bench.vocabulary import OK
from loader.remote.ranges import DEFAULT_CONCURRENCY
from loader.vocabulary import REFERENCE, TOTAL

NO_REMOTE_RUNS = (
    "no remote runs over a shaped link to answer from: measure some with `bench run --source "
    "http --link 1Gbit --remote-concurrency 1,4,16,64` (as root) first"
)


def remote_runs(results: Results) -> pd.DataFrame:
    """The ok whole-run rows of remote loads over a shaped link (a `ceiling_s` from its
    bandwidth), the reference line left out."""
    rows = headline(results.phases)
    rows = rows[(rows["phase"] == TOTAL) & (rows["status"] == OK) & (rows["kind"] != REFERENCE)]
    rows = rows[rows["source"].fillna(FILE_SOURCE) != FILE_SOURCE]
    rows = rows[rows["link"].notna() & (rows["link"] != UNSHAPED) & rows["concurrency"].notna()]
    wall, ceiling = pd.to_numeric(rows["wall_s"]), pd.to_numeric(rows["ceiling_s"])
    rows = rows[wall.notna() & (ceiling > 0)]
    checkpoint = pd.to_numeric(rows["checkpoint_bytes"])
    return rows.assign(
        wall_s=pd.to_numeric(rows["wall_s"]),
        ceiling_s=pd.to_numeric(rows["ceiling_s"]),
        concurrency=pd.to_numeric(rows["concurrency"]).astype(int),
        processes=pd.to_numeric(rows["processes"]).astype(int),
        share_ratio=pd.to_numeric(rows["share_bytes"]) / checkpoint,
        header_bytes=pd.to_numeric(rows["header_bytes"]),
    )


@dataclass(frozen=True)
class ConcurrencyPoint:
    """One measured concurrency on a curve: the median wall and its repeats' range, the median
    wall over the link's ceiling, and how many ok runs it rests on."""

    concurrency: int
    wall_s: float
    wall_s_min: float
    wall_s_max: float
    ceiling_ratio: float
    runs: int


@dataclass(frozen=True)
class ConcurrencyCurve:
    """A strategy's load time against `--remote-concurrency` over one source and link.

    Example:
        >>> curve.wanted.concurrency, curve.default_rank  # doctest: +SKIP
        (16, 1)
    """

    source: str
    link: str
    shapes: str
    strategy: str
    points: list[ConcurrencyPoint]  # by concurrency
    processes: int = 1  # a multi-process strategy's count (each its own curve)

    @property
    def label(self) -> str:
        """The strategy, with its process count where several (`sharded (2 processes)`)."""
        return process_label(self.strategy, self.processes)

    @property
    def wanted(self) -> ConcurrencyPoint:
        """The fastest measured concurrency (the lowest among equal medians)."""
        return min(self.points, key=lambda p: (p.wall_s, p.concurrency))

    @property
    def too_close(self) -> list[int]:
        """The other concurrencies whose repeats overlap the fastest's: too close to call."""
        w = self.wanted
        return [
            p.concurrency
            for p in self.points
            if p is not w and p.wall_s_min <= w.wall_s_max and w.wall_s_min <= p.wall_s_max
        ]

    @property
    def default_rank(self) -> int | None:
        """The default concurrency's place by time (1: the fastest); None: not measured."""
        ranked = sorted(self.points, key=lambda p: (p.wall_s, p.concurrency))
        at = [i for i, p in enumerate(ranked) if p.concurrency == DEFAULT_CONCURRENCY]
        return at[0] + 1 if at else None

    def to_dict(self) -> dict[str, Any]:
        """`recommend --link --json`'s object under `concurrency`: the curve, what it wants, and
        its sentence."""
        return {
            "source": self.source,
            "link": self.link,
            "shapes": self.shapes,
            "strategy": self.strategy,
            "processes": self.processes,
            "wanted": self.wanted.concurrency,
            "too_close": self.too_close,
            "default_rank": self.default_rank,
            "points": [asdict(p) for p in self.points],
            "sentence": self.sentence(),
        }

    def sentence(self) -> str:
        """`over http at 1Gbit (gpt2), pipelined wants concurrency 16: ...; the default ...`."""
        w = self.wanted
        head = (
            f"Over {self.source} at {self.link} ({self.shapes}), {self.label} wants "
            f"concurrency {w.concurrency}: {w.wall_s:.2f} s, {w.ceiling_ratio:.2f}x the link's "
            f"ceiling ({w.runs} runs)"
        )
        if self.too_close:
            head += f"; {', '.join(map(str, self.too_close))} too close to call"
        rank = self.default_rank
        if rank is None:
            tail = f"the default ({DEFAULT_CONCURRENCY}) was not measured"
        elif rank == 1:
            tail = f"the default ({DEFAULT_CONCURRENCY}) is the fastest"
        else:
            d = next(p for p in self.points if p.concurrency == DEFAULT_CONCURRENCY)
            tail = (
                f"the default ({DEFAULT_CONCURRENCY}) is {_ordinal(rank)} of {len(self.points)}, "
                f"{d.wall_s / w.wall_s:.2f}x the fastest's time"
            )
        return f"{head}; {tail}."


def _count(value: object) -> int:
    """A group key read back as the count it is (pandas types it `Hashable`)."""
    return int(cast("int", value))


def _ordinal(n: int) -> str:
    return f"{n}{'tsnrhtdd'[(n // 10 % 10 != 1) * (n % 10 < 4) * n % 10 :: 4]}"


def _point(concurrency: int, rows: pd.DataFrame) -> ConcurrencyPoint:
    wall = rows["wall_s"]
    return ConcurrencyPoint(
        concurrency,
        float(wall.median()),
        float(wall.min()),
        float(wall.max()),
        float((wall / rows["ceiling_s"]).median()),
        len(rows),
    )


def _points(rows: pd.DataFrame) -> list[ConcurrencyPoint]:
    """One point per concurrency of `rows` (one source, link and strategy), by concurrency."""
    return [_point(_count(c), g) for c, g in rows.groupby("concurrency")]


def concurrency_curves(results: Results) -> list[ConcurrencyCurve]:
    """One curve per (source, link, shape set, strategy, processes) measured over a shaped
    link, by source, link bandwidth, shapes, strategy and processes."""
    rows = remote_runs(results)
    curves = []
    for (source, link, shapes, strategy, procs), group in rows.groupby(
        ["source", "link", "shapes", "strategy", "processes"], sort=False
    ):
        curves.append(
            ConcurrencyCurve(
                str(source), str(link), str(shapes), str(strategy), _points(group), _count(procs)
            )
        )
    return sorted(
        curves,
        key=lambda c: (c.source, Link.parse(c.link).bits_per_s, c.shapes, c.strategy, c.processes),
    )


@dataclass(frozen=True)
class LinkPrediction:
    """A strategy's predicted load over `link` from `source`, and what it rests on: the measured
    link (`basis_link`) at its fastest concurrency, its `x ceiling` there, its runs and shapes;
    `lower_bound` where the link is faster than every one measured (the CPU may set the time);
    `processes` of a multi-process strategy, whose `link_bytes` (what crosses the link: its
    processes' shares plus headers, as measured per checkpoint byte) set its `ceiling_s`."""

    strategy: str
    source: str
    link: str
    checkpoint_bytes: int
    ceiling_s: float
    predicted_wall_s: float
    predicted_peak_bytes: int
    basis_link: str
    basis_concurrency: int
    basis_ceiling_ratio: float
    basis_runs: int
    basis_shapes: str
    basis_checkpoint_bytes: int
    lower_bound: bool
    processes: int = 1
    link_bytes: int | None = None  # None: the checkpoint's bytes

    @property
    def label(self) -> str:
        """The strategy, with its process count where several (`sharded (2 processes)`)."""
        return process_label(self.strategy, self.processes)

    def to_dict(self) -> dict[str, object]:
        """The JSON object `recommend --link --json` prints per strategy."""
        return asdict(self)


def _link_bytes(rows: pd.DataFrame, checkpoint_bytes: int) -> int:
    """The bytes a load of `checkpoint_bytes` sends over the link, from `rows` (one strategy's):
    the checkpoint's; a multi-process load's, its processes' shares as measured per checkpoint
    byte (a replicated tensor is in every share) plus their headers (a few requests each,
    whatever the checkpoint's size)."""
    shares = rows.dropna(subset=["share_ratio"])
    if shares.empty:
        return checkpoint_bytes
    headers = float(shares["header_bytes"].fillna(0).median())
    return int(checkpoint_bytes * float(shares["share_ratio"].median()) + headers)


def _closest(links: list[str], link: Link) -> str:
    """The measured link nearest `link` in bandwidth by ratio (1Gbit: as near 100Mbit as 10Gbit)."""
    return min(links, key=lambda t: abs(math.log(Link.parse(t).bits_per_s / link.bits_per_s)))


def link_prediction(
    results: Results, link: Link, checkpoint_bytes: int | None = None
) -> tuple[list[LinkPrediction], list[ConcurrencyCurve]]:
    """`recommend --link`'s answer: each strategy's prediction over `link` (`predict_link`), and
    the concurrency curves of the sources and measured links those predictions stand on.

    Example:
        >>> predictions, curves = link_prediction(results, Link.parse("1Gbit"))  # doctest: +SKIP
    """
    predictions = predict_link(results, link, checkpoint_bytes)
    bases = {(p.source, p.basis_link) for p in predictions}
    return predictions, [c for c in concurrency_curves(results) if (c.source, c.link) in bases]


def predict_link(
    results: Results, link: Link, checkpoint_bytes: int | None = None
) -> list[LinkPrediction]:
    """Each remote-loaded strategy's time and host peak over `link`, fastest first (module doc).

    Args:
        results: measured runs (`read_results`), some of them over shaped links.
        link: the link to predict for (`Link.parse("1Gbit")`).
        checkpoint_bytes: the target's bytes; None: the measured checkpoint's (the largest).

    Raises:
        NoResultsError: no ok remote run over a shaped link (`NO_REMOTE_RUNS`).
    """
    rows = remote_runs(results)
    if rows.empty:
        raise NoResultsError(NO_REMOTE_RUNS)
    out = []
    for (source, strategy, procs), group in rows.groupby(
        ["source", "strategy", "processes"], sort=False
    ):
        links = [str(t) for t in group["link"].unique()]
        basis = group[group["link"] == _closest(links, link)]
        basis = basis[basis["checkpoint_bytes"] == basis["checkpoint_bytes"].max()]
        curve = ConcurrencyCurve(
            str(source),
            str(basis["link"].iloc[0]),
            str(basis["shapes"].iloc[0]),
            str(strategy),
            _points(basis),
            _count(procs),
        )
        best = curve.wanted
        at_best = basis[basis["concurrency"] == best.concurrency]
        nbytes = checkpoint_bytes or int(at_best["checkpoint_bytes"].iloc[0])
        link_bytes = _link_bytes(at_best, nbytes)
        ceiling = link.ceiling_s(link_bytes)
        over = pd.to_numeric(at_best["peak_rss_bytes"]) - pd.to_numeric(
            at_best["baseline_rss_bytes"]
        )
        per_byte = float((over / pd.to_numeric(at_best["checkpoint_bytes"])).median())
        baseline = float(pd.to_numeric(at_best["baseline_rss_bytes"]).median())
        fastest_measured = max(Link.parse(t).bits_per_s for t in links)
        out.append(
            LinkPrediction(
                strategy=str(strategy),
                source=str(source),
                link=link.text,
                checkpoint_bytes=nbytes,
                ceiling_s=ceiling,
                predicted_wall_s=best.ceiling_ratio * ceiling,
                predicted_peak_bytes=int(baseline + per_byte * nbytes),
                basis_link=curve.link,
                basis_concurrency=best.concurrency,
                basis_ceiling_ratio=best.ceiling_ratio,
                basis_runs=best.runs,
                basis_shapes=curve.shapes,
                basis_checkpoint_bytes=int(at_best["checkpoint_bytes"].iloc[0]),
                lower_bound=link.bits_per_s > fastest_measured,
                processes=_count(procs),
                link_bytes=link_bytes if link_bytes != nbytes else None,
            )
        )
    return sorted(out, key=lambda p: (p.predicted_wall_s, p.strategy, p.processes, p.source))


def basis_sentence(predictions: list[LinkPrediction]) -> str:
    """One sentence: from which measured links and runs the predictions were extrapolated."""
    first = predictions[0]
    bases = sorted({(p.source, p.basis_link, p.basis_shapes) for p in predictions})
    said = ", ".join(f"{s} at {t} ({shapes})" for s, t, shapes in bases)
    runs = sum(p.basis_runs for p in predictions)
    sentence = (
        f"Extrapolated from {runs} runs over {said}: each strategy's measured wall / ceiling at "
        f"that link's fastest concurrency, times {first.link}'s ceiling "
        f"({format_seconds(first.ceiling_s)} for {format_bytes(first.checkpoint_bytes)})"
    )
    if any(p.processes > 1 for p in predictions):
        sentence += (
            "; several processes share the one link, so their ceiling is of all their shares "
            "(per checkpoint byte, as measured) plus their headers"
        )
    if any(p.lower_bound for p in predictions):
        sentence += "; faster than every link measured, so the CPU may set the time: a lower bound"
    if any(p.basis_checkpoint_bytes < MIN_FIT_BYTES for p in predictions):
        sentence += (
            f"; measured on a checkpoint under {format_bytes(MIN_FIT_BYTES)}, whose time is mostly "
            "per-load overhead, not the link: measure gpt2 or larger over the link to rely on it"
        )
    return sentence + "."


def prediction_lines(predictions: list[LinkPrediction], host_ram: int | None = None) -> list[str]:
    """The text `recommend --link` prints: a table (a verdict column against `host_ram` where
    given), then the basis sentence."""
    header = ["strategy", "source", "predicted s", "host peak", "from link", "x ceiling there"]
    header += ["verdict"] if host_ram else []
    rows = [header] + [
        [
            p.label,
            p.source,
            f"{p.predicted_wall_s:.2f}" + (" (at least)" if p.lower_bound else ""),
            format_bytes(p.predicted_peak_bytes),
            f"{p.basis_link} at concurrency {p.basis_concurrency}",
            f"{p.basis_ceiling_ratio:.2f}x",
            *([verdict(p.predicted_peak_bytes, host_ram)] if host_ram else []),
        ]
        for p in predictions
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    table = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    table.insert(1, "  ".join("-" * w for w in widths))
    return [*table, basis_sentence(predictions)]
