"""The Overview's chart: peak RSS against wall time, one point per strategy.

It draws the answer the headline gives: by default the y axis is the absolute peak RSS (the
headline's number), with the host's RAM as a red dashed line and, under it, the margin the headline
uses (the host RAM less 10%, `dashboard.answer.margin_bytes`) as a red solid line: a strategy fits
where its point is under the margin line. Reference strategies (kind `reference`, e.g. `floor`)
are a dotted horizontal line, not a point; peers are hollow points. The machine's ceiling
(`ceiling_line`) is a dash-dot rule on the time axis. The Pareto front is a thin staircase through
its points, drawn to the chart's edges, and each front point is outlined in black (a ring around
it would cover a neighbour). The time axis is logarithmic by default, so that loads of 1 and 2 s
stay apart beside one of 20 s.

Labels are placed in Python so that none overlaps another, a point or a line's label: the lines'
labels are placed first, then each point's label starts beside its point and moves up or down in
label-height steps until it is clear, with a thin leader line when it moved. `LINE_STYLES` holds
each line's colour and dash, and the caption is written from it, so the two cannot disagree.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import altair as alt
import pandas as pd

from bench.vocabulary import COLD, STATUSES
from dashboard import answer, style
from loader.vocabulary import PEER, REFERENCE

HEIGHT = 300
HOST_COLOR = "#c62828"
CEILING_COLOR = "#1565c0"
FRONT_COLOR = "#222222"
ASSUMED_WIDTH = 640  # px; the real chart is wider, which only leaves more room between labels
LABEL_H, CHAR_W, GAP = 16.0, 7.0, 10.0  # GAP: from a point's centre to its label's left edge
POINT_R = 7.0  # px: half a point's box, kept clear of every label
CEILING_CHAR_W = 6.0  # px per character of the ceiling's label (10 px type)
STATUS_SHAPES = dict(
    zip(
        STATUSES,
        ["circle", "diamond", "triangle-up", "square", "cross", "triangle-down", "triangle-left"],
        strict=True,
    )
)


@dataclass(frozen=True)
class LineStyle:
    """How one line of the chart is drawn, and the words the caption says of it."""

    color: str
    dash: tuple[int, ...]  # () is solid
    width: float
    words: str  # "red dashed line", as the caption names it
    means: str


HOST, MARGIN, REFERENCE_LINE, CEILING, FRONT = "host", "margin", "reference", "ceiling", "front"
LINE_STYLES = {
    MARGIN: LineStyle(
        HOST_COLOR, (), 2.0, "Red solid line", "the host RAM less 10%: under it fits with room"
    ),
    HOST: LineStyle(HOST_COLOR, (8, 4), 1.5, "Red dashed line", "the host RAM"),
    REFERENCE_LINE: LineStyle(
        style.REFERENCE_COLOR, (1, 3), 2.0, "Grey dotted line", "the reference (the bytes alone)"
    ),
    FRONT: LineStyle(
        FRONT_COLOR,
        (),
        1.2,
        "Thin black staircase and black outlines",
        "the Pareto front (no strategy is both faster and lighter)",
    ),
    CEILING: LineStyle(
        CEILING_COLOR,
        (6, 3, 1, 3),
        2.0,
        "Blue dash-dot rule",
        "the ceiling (the checkpoint's bytes over the probe's best bandwidth for this "
        "situation, or over a shaped link's bandwidth: no load of these bytes is faster)",
    ),
}


def caption(*, host: bool, ceiling: bool, log: bool) -> str:
    """What each line of the chart is, in the words of `LINE_STYLES` (only the lines drawn)."""
    names = [MARGIN, HOST] if host else []
    names += [REFERENCE_LINE, FRONT] + ([CEILING] if ceiling else [])
    parts = [f"{LINE_STYLES[n].words}: {LINE_STYLES[n].means}." for n in names]
    parts.append("Hollow points: peers.")
    if log:
        parts.append("Both axes are logarithmic: equal steps are equal ratios.")
    return " ".join(parts)


def _to_unit(value: float, lo: float, hi: float, log: bool) -> float:
    """Where `value` sits between `lo` and `hi` (0 to 1), on a linear or a log scale."""
    if log:
        value, lo, hi = (math.log10(max(v, 1e-12)) for v in (value, lo, hi))
    return (value - lo) / ((hi - lo) or 1.0)


def _from_unit(fraction: float, lo: float, hi: float, log: bool) -> float:
    if log:
        return 10 ** (math.log10(lo) + fraction * (math.log10(hi) - math.log10(lo)))
    return lo + fraction * (hi - lo)


@dataclass(frozen=True)
class Plot:
    """The plot area in data units and pixels; each axis linear or logarithmic."""

    x_min: float
    x_max: float
    y_min: float
    y_max: float
    log: bool = False  # both axes logarithmic (the peaks' cluster and the times' spread out)

    def px(self, x: float) -> float:
        return _to_unit(x, self.x_min, self.x_max, self.log) * ASSUMED_WIDTH

    def x_of(self, px: float) -> float:
        return _from_unit(px / ASSUMED_WIDTH, self.x_min, self.x_max, self.log)

    def py(self, y: float) -> float:
        return HEIGHT - _to_unit(y, self.y_min, self.y_max, self.log) * HEIGHT

    def y_of(self, py: float) -> float:
        return _from_unit((HEIGHT - py) / HEIGHT, self.y_min, self.y_max, self.log)


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in px (y down)


def _overlaps(box: Box, placed: list[Box]) -> bool:
    x0, y0, x1, y1 = box
    return any(x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1 for b in placed)


def _covered(box: Box, placed: list[Box]) -> float:
    """How many px² of `box` the boxes `placed` cover (overlaps counted each time)."""
    x0, y0, x1, y1 = box
    return sum(
        max(0.0, min(x1, b[2]) - max(x0, b[0])) * max(0.0, min(y1, b[3]) - max(y0, b[1]))
        for b in placed
    )


def _free_box(
    left: float, centre_y: float, width: float, placed: list[Box], steps: int = 60
) -> Box:
    """The first box `width` wide at `left` clear of `placed`: at `centre_y`, then one, two, ...
    label heights above and below it (kept inside the plot)."""
    box = (left, 0.0, left + width, LABEL_H)
    for step in range(steps):
        shift = (step + 1) // 2 * LABEL_H * (-1 if step % 2 else 1)
        top = min(max(centre_y + shift - LABEL_H / 2, 0.0), HEIGHT - LABEL_H)
        box = (left, top, left + width, top + LABEL_H)
        if not _overlaps(box, placed):
            return box
    return box


def point_boxes(points: pd.DataFrame, x: str, y: str, plot: Plot) -> list[Box]:
    """The box each point's marker covers, which no label may cover."""
    centres = [(plot.px(float(px)), plot.py(float(py))) for px, py in zip(points[x], points[y])]
    return [(cx - POINT_R, cy - POINT_R, cx + POINT_R, cy + POINT_R) for cx, cy in centres]


def line_boxes(ys: list[float], plot: Plot) -> list[Box]:
    """A thin box along each horizontal line (in data units), so no label is written over it."""
    return [(0.0, plot.py(v) - 1.5, ASSUMED_WIDTH, plot.py(v) + 1.5) for v in ys]


def place_labels(
    points: pd.DataFrame, x: str, y: str, plot: Plot, taken: list[Box] | None = None
) -> tuple[pd.DataFrame, list[Box]]:
    """`points` with `label_x`, `label_y` (data units) so that no label box overlaps another,
    a point, or a box in `taken` (the lines' labels); and every box placed.

    Boxes are estimated at CHAR_W px per character and LABEL_H px high on an ASSUMED_WIDTH x
    HEIGHT plot; points are taken from the top down, each label tried first just above its point,
    then one, two, ... label heights below and above, the first free slot kept; a label that would
    run past the right edge is put left of its point.
    """
    placed = list(taken or []) + point_boxes(points, x, y, plot)
    out = []
    for _, row in points.sort_values(y, ascending=False).iterrows():
        cx, cy = plot.px(float(row[x])), plot.py(float(row[y]))
        width = CHAR_W * len(str(row["label"]))
        left = cx + GAP if cx + GAP + width <= ASSUMED_WIDTH else cx - GAP - width
        box = _free_box(left, cy - LABEL_H * 0.6, width, placed)
        placed.append(box)
        label_y = plot.y_of((box[1] + box[3]) / 2)
        out.append({**row.to_dict(), "label_x": plot.x_of(box[0]), "label_y": label_y})
    return pd.DataFrame(out), placed


def _staircase(front: pd.DataFrame, x: str, y: str, plot: Plot) -> pd.DataFrame:
    """The front as a staircase from the top edge to the right edge (lower-left is better)."""
    pts = front.sort_values(x)[[x, y]].to_numpy()
    path = [(pts[0][0], plot.y_max)]
    for i, (px, py) in enumerate(pts):
        if i:
            path.append((px, pts[i - 1][1]))
        path.append((px, py))
    path.append((plot.x_max, pts[-1][1]))
    return pd.DataFrame(path, columns=[x, y]).assign(order=range(len(path)))


# Tick grids for a log axis, of nice numbers: mantissas times each power of ten (sparsest first),
# and even steps of 1, 2, 2.5 or 5 times a power of ten (for a domain inside a decade or two).
TICK_MANTISSAS = (
    (1.0,),
    (1.0, 2.0, 5.0),
    (1.0, 1.5, 2.0, 3.0, 5.0, 7.0),
    (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0),
    tuple(m / 2 for m in range(2, 20)),  # 1, 1.5, 2, ..., 9.5
)
STEPS = (1.0, 2.0, 2.5, 5.0)
MAX_TICKS = 8


def _grids(lo: float, hi: float) -> list[list[float]]:
    """Every candidate set of ticks between `lo` and `hi` (see TICK_MANTISSAS, STEPS)."""
    decades = range(math.floor(math.log10(lo)) - 2, math.floor(math.log10(hi)) + 1)
    grids = [
        [m * 10.0**e for e in decades for m in mantissas if lo <= m * 10.0**e <= hi]
        for mantissas in TICK_MANTISSAS
    ]
    for e in decades:
        for step in (s * 10.0**e for s in STEPS):
            first = math.ceil(lo / step - 1e-9)
            count = math.floor(hi / step + 1e-9) - first + 1
            if 0 < count <= MAX_TICKS:
                grids.append([(first + i) * step for i in range(count)])
    return [[float(f"{t:.3g}") for t in g] for g in grids]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values for a log axis from `lo` to `hi`: the set of nice numbers (at most MAX_TICKS)
    whose widest gap, from `lo` through the ticks to `hi`, is narrowest on the log scale: every
    part of the axis is ticked, so a cluster of points at the bottom of a domain under a decade
    (peaks from 2.3 to 2.9 GiB beside one at 7) is ticked where it sits, not only at 3 and above.

    Example:
        >>> log_ticks(2.17, 7.77), log_ticks(0.0004, 6.4)
        ([2.5, 3.0, 4.0, 5.0, 6.0], [0.001, 0.01, 0.1, 1.0])
    """

    def widest_gap(ticks: list[float]) -> float:
        edges = [math.log(v) for v in (lo, *ticks, hi)]
        return max(b - a for a, b in zip(edges, edges[1:], strict=False))

    fitting = [g for g in _grids(lo, hi) if 2 <= len(g) <= MAX_TICKS]
    if not fitting:
        return [float(f"{lo:.3g}"), float(f"{hi:.3g}")]
    return min(fitting, key=lambda g: (round(widest_gap(g), 6), -len(g)))


XEncoder = Callable[[str], alt.X]
YEncoder = Callable[[str], alt.Y]


def _axes(plot: Plot, y_title: str, y_format: str) -> tuple[XEncoder, YEncoder]:
    """Encoders for x and y of any field, on the one shared scale and axis of the chart."""
    x_format = ".2f" if plot.x_max >= 0.2 else ".3f"  # seconds with 2 decimals, unless all are ~0
    log = ", log scale)" if plot.log else ")"
    kind: Literal["log", "linear"] = "log" if plot.log else "linear"

    x_ticks = {"values": log_ticks(plot.x_min, plot.x_max)} if plot.log else {"tickCount": 8}
    y_ticks = {"values": log_ticks(plot.y_min, plot.y_max)} if plot.log else {"tickCount": 8}

    def x(field: str) -> alt.X:
        return alt.X(
            f"{field}:Q",
            title="wall time (s, median" + log,
            scale=alt.Scale(type=kind, domain=[plot.x_min, plot.x_max], nice=False),
            axis=alt.Axis(format="~g" if plot.log else x_format, **x_ticks),
        )

    def y(field: str) -> alt.Y:
        return alt.Y(
            f"{field}:Q",
            title=y_title.removesuffix(")") + log if y_title.endswith(")") else y_title,
            scale=alt.Scale(type=kind, domain=[plot.y_min, plot.y_max], nice=False),
            axis=alt.Axis(format=y_format, **y_ticks),
        )

    return x, y


def _rule(data: pd.DataFrame, line: LineStyle) -> alt.Chart:
    dash = list(line.dash) if line.dash else []
    return alt.Chart(data).mark_rule(color=line.color, strokeDash=dash, strokeWidth=line.width)


def _text(data: pd.DataFrame, color: str, **kw) -> alt.Chart:
    return alt.Chart(data).mark_text(align="left", baseline="middle", color=color, **kw)


@dataclass(frozen=True)
class HostLine:
    """The host's RAM on the chart's axis (`y`) and the margin the headline uses (`margin_y`: the
    host RAM less 10%), each with its label."""

    y: float
    label: str
    margin_y: float
    margin_label: str


def host_line(shown: pd.DataFrame, ram: int, as_ratio: bool, divisor: float) -> HostLine:
    """The host's RAM and the headline's margin (the host RAM less 10%) on the chart's axis: as
    they are on the absolute axis; less the median baseline on the x checkpoint axis."""
    margin = answer.margin_bytes(ram)
    said = f"fits with 10% to spare: peak ≤ {style.size(margin)}"
    if not as_ratio:
        return HostLine(ram / divisor, f"host RAM {style.size(ram)}", margin / divisor, said)
    base = float(pd.to_numeric(shown["baseline_rss_bytes"]).median())
    ckpt = float(shown["checkpoint_bytes"].iloc[0])
    return HostLine(
        (ram - base) / ckpt,
        f"host RAM {style.size(ram)} (less the median baseline)",
        (margin - base) / ckpt,
        said + " (less the median baseline)",
    )


@dataclass(frozen=True)
class LineLabel:
    """A horizontal line's label, placed like a point's: its text and its box."""

    text: str
    x: float
    y: float
    box: Box


LINE_GAP = 2.0  # px between a horizontal line and its label's box


def _line_label(text: str, y_px: float, right: bool, plot: Plot, taken: list[Box]) -> LineLabel:
    """A label for a horizontal line at `y_px`, always touching it: just above it at the plot's
    left end (`right`: its right end), else the first of above at the other end, below at
    either end that is clear; where none is, the one that covers least (a label never leaves
    its line to find room)."""
    width = CHAR_W * len(text)
    ends = [ASSUMED_WIDTH - width - 4, 4.0] if right else [4.0, ASSUMED_WIDTH - width - 4]
    tops = [y_px - LINE_GAP - LABEL_H, y_px + LINE_GAP]  # above, below
    slots = [(left, min(max(top, 0.0), HEIGHT - LABEL_H)) for top in tops for left in ends]
    boxes = [(left, top, left + width, top + LABEL_H) for left, top in slots]
    box = min(boxes, key=lambda b: _covered(b, taken))  # the first clear one, if any
    taken.append(box)
    return LineLabel(text, plot.x_of(box[0]), plot.y_of((box[1] + box[3]) / 2), box)


def _host_layers(
    host: HostLine, plot: Plot, x_enc: XEncoder, y_enc: YEncoder, taken: list[Box]
) -> list[alt.Chart]:
    """The host RAM (red dashed) and the margin under it (red solid), each labelled beside it; a
    line far above every point is pinned to the top edge and says so, and where both are, one
    label says it of both."""
    lines = [(host.y, host.label, HOST), (host.margin_y, host.margin_label, MARGIN)]
    above = [y > plot.y_max * 1.0001 for y, _, _ in lines]
    if all(above):
        lines = [(host.y, f"{host.label} and its 10% margin: {ABOVE}", HOST)]
    layers = []
    for (y, label, name), pinned in zip(lines, above, strict=False):
        if pinned and len(lines) == 2:  # the host line only: the margin is on the chart
            label += f" ({ABOVE})"
        y = min(y, plot.y_max)
        placed = _line_label(label, plot.py(y), False, plot, taken)
        data = pd.DataFrame({"y": [y], "lx": [placed.x], "ly": [placed.y], "text": [label]})
        layers.append(_rule(data, LINE_STYLES[name]).encode(y=y_enc("y")))
        mark = _text(data, HOST_COLOR, fontWeight="bold" if name == MARGIN else "normal")
        layers.append(mark.encode(x=x_enc("lx"), y=y_enc("ly"), text="text:N"))
    return layers


ABOVE = "above the chart: every peak is far below"


def _reference_layers(
    refs: pd.DataFrame, y: str, fmt: str, plot: Plot, x_enc: XEncoder, y_enc: YEncoder, taken
) -> list[alt.Chart]:
    """A dotted horizontal rule per reference strategy, labelled at its right end."""
    refs = refs.dropna(subset=[y])
    layers = []
    for _, ref in refs.iterrows():
        text = f"{ref['strategy']} (reads the bytes only): {format(ref[y], fmt)}"
        placed = _line_label(text, plot.py(float(ref[y])), True, plot, taken)
        data = pd.DataFrame({"y": [ref[y]], "lx": [placed.x], "ly": [placed.y], "text": [text]})
        layers.append(_rule(data, LINE_STYLES[REFERENCE_LINE]).encode(y=y_enc("y")))
        mark = _text(data, "#555", fontStyle="italic")
        layers.append(mark.encode(x=x_enc("lx"), y=y_enc("ly"), text="text:N"))
    return layers


LINK_PROBE = "link:"  # a remote row's `ceiling_probe_id`: its shaped link's (`bench.run.rows`)


@dataclass(frozen=True)
class CeilingLine:
    """The machine's ceiling on the time axis: `x` seconds, its label along the rule (short
    enough to stand inside the plot) and `about`, what it came from (its tooltip)."""

    x: float
    label: str
    about: str = ""


def _situation(rows: pd.DataFrame, seconds: pd.Series) -> str:
    """What bounded the rows: the warm copy, the disk's cold read, or the disk read cap."""
    if (rows["cache"] != COLD).all():
        return "warm copy"
    cap = pd.to_numeric(rows.get("disk_read_bytes_per_s", pd.Series(dtype=float))).dropna()
    rate = (pd.to_numeric(rows["checkpoint_bytes"]) / seconds).median()
    return "disk read cap" if len(cap) and abs(rate / cap.median() - 1) < 1e-3 else "cold read"


def ceiling_line(rows: pd.DataFrame) -> CeilingLine | None:
    """The ceiling of `rows` (whole-run rows of one situation: `ceiling_s`, `ceiling_probe_id`,
    `cache`, `checkpoint_bytes`): the median `ceiling_s`, labelled with what bounded it and the
    probe it came from; None where no row has one (results from before the probe)."""
    if "ceiling_s" not in rows:
        return None
    seconds = pd.to_numeric(rows["ceiling_s"])
    rows, seconds = rows[seconds.notna()], seconds.dropna()
    if seconds.empty:
        return None
    x = float(seconds.median())
    ids = sorted({p for p in rows.get("ceiling_probe_id", []) if isinstance(p, str)})
    text = style.seconds(x)
    links = [i.removeprefix(LINK_PROBE) for i in ids if i.startswith(LINK_PROBE)]
    if links and len(links) == len(ids):  # a shaped link's: the bytes over its bandwidth
        label = f"ceiling {text} (the bytes over the {', '.join(links)} link)"
        return CeilingLine(x, label, label)
    label = f"ceiling {text} ({_situation(rows, seconds)})"
    return CeilingLine(x, label, f"{label[:-1]}, probe {', '.join(ids) or 'unnamed'})")


def ceiling_box(ceiling: CeilingLine, plot: Plot) -> Box:
    """The column the ceiling's label takes along its rule, from the plot's bottom (left of the
    rule), which no other label may cover."""
    cx = plot.px(ceiling.x)
    tall = min(CEILING_CHAR_W * len(ceiling.label) + 8, HEIGHT)  # never above the plot
    return (cx - LABEL_H - 2, HEIGHT - tall, cx, HEIGHT)


def _ceiling_layers(
    ceiling: CeilingLine, plot: Plot, x_enc: XEncoder, y_enc: YEncoder
) -> list[alt.Chart]:
    """A blue rule at the ceiling's time, labelled along it from the bottom (left of it, where no
    load is faster); its label's column (`ceiling_box`) is kept clear of every other label."""
    line = pd.DataFrame(
        {"x": [ceiling.x], "y": [plot.y_min], "text": [ceiling.label], "about": [ceiling.about]}
    )
    label = alt.Chart(line).mark_text(
        angle=270,
        align="left",
        baseline="bottom",
        dx=4,
        dy=-3,
        fontSize=10,
        color=CEILING_COLOR,
        limit=HEIGHT - 8,  # px: a longer label is cut with an ellipsis, inside the plot
    )
    return [
        _rule(line, LINE_STYLES[CEILING]).encode(
            x=x_enc("x"), tooltip=alt.Tooltip("about:N", title="ceiling")
        ),
        label.encode(x=x_enc("x"), y=y_enc("y"), text="text:N", tooltip="about:N"),
    ]


OFF_SCALE = 1.5  # a host line this far above the highest point is pinned at the top edge


def _plot(drawn: pd.DataFrame, y: str, host: HostLine | None, ceiling, log: bool) -> Plot:
    """The plot's domains: every point, the reference, the ceiling, and the host's lines unless
    they are far above every point (then pinned to the top edge)."""
    walls = [float(w) for w in drawn["wall_s"]] + ([ceiling.x] if ceiling else [])
    peaks = [float(v) for v in drawn[y]]
    top = max(peaks, default=0.0)
    if host is not None and host.y <= top * OFF_SCALE:
        peaks += [host.y, host.margin_y]
    if log and min(walls, default=0) > 0 and min(peaks, default=0) > 0:
        return Plot(min(walls) / 1.4, max(walls) * 1.6, min(peaks) / 1.08, max(peaks) * 1.12, True)
    x_max = max(max(walls, default=0.0) * 1.25, 1e-3)
    return Plot(0.0, x_max, 0.0, max(max(peaks, default=0.0) * 1.12, 1e-9), False)


def overview_scatter(
    df: pd.DataFrame,
    y: str,
    y_title: str,
    y_format: str,
    host: HostLine | None = None,
    ceiling: CeilingLine | None = None,
    log: bool = False,
) -> alt.LayerChart:
    """The Overview chart over `df` (one row per strategy: `strategy`, `kind`, `status`, `wall_s`,
    `pareto`, `y`); `y` is a byte column already scaled to the axis unit or `peak_ratio`; `host`
    draws the host's RAM and the headline's margin as lines, `ceiling` the machine's ceiling on
    the time axis; `log` logarithmic axes."""
    drawn = df[df["wall_s"].notna() & df[y].notna()]
    points = drawn[drawn["kind"] != REFERENCE].copy()
    plot = _plot(drawn, y, host, ceiling, log)
    x_enc, y_enc = _axes(plot, y_title, y_format)
    refs = drawn[drawn["kind"] == REFERENCE]
    lines = [min(v, plot.y_max) for v in ([host.y, host.margin_y] if host else [])]
    taken = point_boxes(points, "wall_s", y, plot) + line_boxes([*lines, *refs[y]], plot)
    taken += [ceiling_box(ceiling, plot)] if ceiling is not None else []
    layers: list[alt.Chart] = []
    if host is not None:
        layers += _host_layers(host, plot, x_enc, y_enc, taken)
    layers += _reference_layers(refs, y, y_format, plot, x_enc, y_enc, taken)
    if ceiling is not None:
        layers += _ceiling_layers(ceiling, plot, x_enc, y_enc)
    if points.empty:
        return _sized(layers)
    points["label"] = points["strategy"] + points["kind"].map(
        lambda k: " · peer" if k == PEER else ""
    )
    points, _ = place_labels(points, "wall_s", y, plot, taken)
    layers += _front_layers(points[points["pareto"].astype(bool)], y, plot, x_enc, y_enc)
    layers += _point_layers(points, y, y_format, x_enc, y_enc)
    return _sized(layers)


def _sized(layers: list[alt.Chart]) -> alt.LayerChart:
    """The layers with a plot exactly HEIGHT px high (the labels were placed for it): the width
    fits the page, the axes come on top of the height (Streamlit's default `fit` would squeeze
    the plot to make room for them)."""
    autosize = alt.AutoSizeParams(type="fit-x", contains="padding")
    return alt.LayerChart(layer=layers).properties(height=HEIGHT, autosize=autosize)


def _front_layers(front: pd.DataFrame, y: str, plot: Plot, x_enc, y_enc) -> list[alt.Chart]:
    """The Pareto staircase (drawn under the points)."""
    if front.empty:
        return []
    stairs = _staircase(front, "wall_s", y, plot)
    line = LINE_STYLES[FRONT]
    mark = alt.Chart(stairs).mark_line(color=line.color, strokeWidth=line.width, opacity=0.7)
    return [mark.encode(x=x_enc("wall_s"), y=y_enc(y), order="order:Q")]


def _tooltip(points: pd.DataFrame, y: str, y_format: str) -> list[alt.Tooltip]:
    return [
        alt.Tooltip("strategy:N"),
        *([alt.Tooltip("description:N")] if "description" in points else []),
        alt.Tooltip("kind:N"),
        alt.Tooltip("status:N"),
        alt.Tooltip("repeats:Q"),
        alt.Tooltip("wall_s:Q", format=".2f", title="wall s"),
        alt.Tooltip(f"{y}:Q", format=y_format, title="peak"),
        alt.Tooltip("pareto:N", title="on the Pareto front"),
    ]


def _point_layers(points: pd.DataFrame, y: str, y_format: str, x_enc, y_enc) -> list[alt.Chart]:
    """Leader lines, points (strategies filled, peers hollow; front points outlined in black)
    and labels."""
    seen = [s for s in STATUSES if s in set(points["status"])]
    shape = alt.Shape(
        "status:N",
        title="status",
        scale=alt.Scale(domain=seen, range=[STATUS_SHAPES[s] for s in seen]),
    )
    color = alt.Color(
        "strategy:N", title="strategy", scale=style.strategy_scale(points["strategy"])
    )
    tooltip = _tooltip(points, y, y_format)
    layers = []
    moved = points[(points["label_y"] - points[y]).abs() > 1e-12]
    if len(moved):
        leader = alt.Chart(moved).mark_rule(color="#999", strokeWidth=0.8)
        layers.append(leader.encode(x=x_enc("wall_s"), y=y_enc(y), x2="label_x:Q", y2="label_y:Q"))
    for filled in (True, False):
        rows = points[(points["kind"] != PEER) == filled]
        if len(rows):
            mark = alt.Chart(rows).mark_point(size=130, filled=filled, strokeWidth=2, opacity=0.9)
            enc = mark.encode(x=x_enc("wall_s"), y=y_enc(y), color=color, shape=shape)
            layers.append(enc.encode(tooltip=tooltip))
    front = points[points["pareto"].astype(bool)]
    if len(front):
        outline = alt.Chart(front).mark_point(
            size=170, filled=False, color=FRONT_COLOR, strokeWidth=1.5
        )
        layers.append(outline.encode(x=x_enc("wall_s"), y=y_enc(y), shape=shape))
    text = alt.Chart(points).mark_text(align="left", baseline="middle", fontSize=12, color="#222")
    layers.append(text.encode(x=x_enc("label_x"), y=y_enc("label_y"), text="label:N"))
    return layers
