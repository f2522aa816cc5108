"""The Overview's chart: peak over baseline against wall time, one point per strategy.

Reference strategies (kind `reference`, e.g. `floor`) are a labelled horizontal line, not a point;
peers are hollow points. The machine's ceiling (`ceiling_line`: the median `ceiling_s` of the
rows, the checkpoint's bytes over the probe's best bandwidth for their situation) is a labelled
rule on the time axis, drawn only where rows have one. The Pareto front is a staircase through its
points, drawn to the chart's edges so it stays visible when two front points nearly coincide, and
each front point is ringed. Labels are placed in Python so that none overlaps another: each starts
beside its point and moves up or down in label-height steps until it is clear, with a thin leader
line when it moved.
"""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from bench.vocabulary import COLD
from dashboard import style
from loader.vocabulary import PEER, REFERENCE, STATUSES

HEIGHT = 360
HOST_COLOR = "#c62828"
CEILING_COLOR = "#1565c0"
ASSUMED_WIDTH = 640  # px; the real chart is wider, which only leaves more room between labels
LABEL_H, CHAR_W, GAP = 14.0, 6.6, 15.0  # GAP clears the Pareto ring around a point
STATUS_SHAPES = dict(
    zip(
        STATUSES,
        ["circle", "diamond", "triangle-up", "square", "cross", "triangle-down", "triangle-left"],
        strict=True,
    )
)


def _overlaps(box: tuple[float, float, float, float], placed: list) -> bool:
    x0, y0, x1, y1 = box
    return any(x0 < b[2] and b[0] < x1 and y0 < b[3] and b[1] < y1 for b in placed)


def place_labels(points: pd.DataFrame, x: str, y: str, x_max: float, y_max: float) -> pd.DataFrame:
    """`points` with `label_x`, `label_y` (data units) so that no two label boxes overlap.

    Boxes are estimated at CHAR_W px per character and LABEL_H px high on an ASSUMED_WIDTH x
    HEIGHT plot; points are taken from the top down, each label tried at its point's height, then
    one, two, ... label heights below and above, the first free slot kept.
    """
    sx, sy = ASSUMED_WIDTH / x_max, HEIGHT / y_max
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for _, row in points.sort_values(y, ascending=False).iterrows():
        px, py = row[x] * sx + GAP, HEIGHT - row[y] * sy
        width = CHAR_W * len(str(row["label"]))
        for step in range(0, 40):  # first just above the point (the front runs right from it)
            shift = (step + 1) // 2 * LABEL_H * (1 if step % 2 else -1) - LABEL_H * 0.6
            top = min(max(py + shift - LABEL_H / 2, 0.0), HEIGHT - LABEL_H)
            box = (px, top, px + width, top + LABEL_H)
            if not _overlaps(box, placed):
                break
        placed.append(box)
        out.append(
            {**row.to_dict(), "label_x": px / sx, "label_y": (HEIGHT - top - LABEL_H / 2) / sy}
        )
    return pd.DataFrame(out)


def _staircase(front: pd.DataFrame, x: str, y: str, x_max: float, y_max: float) -> pd.DataFrame:
    """The front as a staircase from the top edge to the right edge (lower-left is better)."""
    pts = front.sort_values(x)[[x, y]].to_numpy()
    path = [(pts[0][0], y_max)]
    for i, (px, py) in enumerate(pts):
        if i:
            path.append((px, pts[i - 1][1]))
        path.append((px, py))
    path.append((x_max, pts[-1][1]))
    return pd.DataFrame(path, columns=[x, y]).assign(order=range(len(path)))


def _axes(x_max: float, y_max: float, y_title: str, y_format: str):
    """Encoders for x and y of any field, on the one shared scale and axis of the chart."""
    x_format = ".2f" if x_max >= 0.2 else ".3f"  # seconds with 2 decimals, unless all are ~0

    def x(field: str) -> alt.X:
        return alt.X(
            f"{field}:Q",
            title="wall time (s, median)",
            scale=alt.Scale(domain=[0, x_max], nice=False),
            axis=alt.Axis(format=x_format, tickCount=8),
        )

    def y(field: str) -> alt.Y:
        return alt.Y(
            f"{field}:Q",
            title=y_title,
            scale=alt.Scale(domain=[0, y_max], nice=False),
            axis=alt.Axis(format=y_format),
        )

    return x, y


def _reference_layers(
    refs: pd.DataFrame, y: str, fmt: str, x_enc, y_enc, x_max: float
) -> list[alt.Chart]:
    """A dotted horizontal rule per reference strategy, labelled under its right end (the points,
    all above a reference that only reads the bytes, crowd its left end)."""
    refs = refs.dropna(subset=[y])
    if refs.empty:
        return []
    refs = refs.assign(
        text=refs["strategy"] + " (reads the bytes only): " + refs[y].map(lambda v: format(v, fmt)),
        right=x_max,
    )
    rule = alt.Chart(refs).mark_rule(
        color=style.REFERENCE_COLOR, strokeDash=[3, 3], strokeWidth=1.5
    )
    text = alt.Chart(refs).mark_text(
        align="right", baseline="top", dx=-4, dy=4, color="#555", fontStyle="italic"
    )
    return [rule.encode(y=y_enc(y)), text.encode(x=x_enc("right"), y=y_enc(y), text="text:N")]


@dataclass(frozen=True)
class HostLine:
    """The host's RAM on the chart: `y` in the chart's unit (RAM less the baseline), a label."""

    y: float
    label: str


OFF_SCALE = 3.0  # a host line this far above the highest point is pinned at the top edge


def _host_layers(host: HostLine, y_max: float, x_enc, y_enc, x_max: float) -> list[alt.Chart]:
    """A red dashed rule at the host's RAM (pinned to the top edge, and said so, when far above
    every point), labelled at its left end."""
    off = host.y > y_max
    text = host.label + (" (above the chart: every peak is far below)" if off else "")
    line = pd.DataFrame({"y": [min(host.y, y_max)], "x": [0.0], "text": [text]})
    rule = alt.Chart(line).mark_rule(color=HOST_COLOR, strokeDash=[8, 4], strokeWidth=2)
    label = alt.Chart(line).mark_text(
        align="left",
        baseline="top" if off else "bottom",
        dx=4,
        dy=3 if off else -3,
        color=HOST_COLOR,
        fontWeight="bold",
    )
    return [
        rule.encode(y=y_enc("y")),
        label.encode(x=x_enc("x"), y=y_enc("y"), text="text:N"),
    ]


@dataclass(frozen=True)
class CeilingLine:
    """The machine's ceiling on the time axis: `x` seconds, and its label."""

    x: float
    label: str


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
    probe = f"probe {', '.join(ids)}" if ids else "probe unnamed"
    text = f"{x:.2f} s" if x >= 0.1 else f"{x * 1000:.1f} ms"
    return CeilingLine(x, f"ceiling {text} ({_situation(rows, seconds)}, {probe})")


def _ceiling_layers(ceiling: CeilingLine, x_enc, y_enc) -> list[alt.Chart]:
    """A blue rule at the ceiling's time, labelled along it from the bottom (left of it, where no
    load is faster)."""
    line = pd.DataFrame({"x": [ceiling.x], "y": [0.0], "text": [ceiling.label]})
    rule = alt.Chart(line).mark_rule(color=CEILING_COLOR, strokeDash=[2, 3], strokeWidth=2)
    label = alt.Chart(line).mark_text(
        angle=270, align="left", baseline="bottom", dx=4, dy=-3, fontSize=10, color=CEILING_COLOR
    )
    return [
        rule.encode(x=x_enc("x"), tooltip=alt.Tooltip("text:N", title="ceiling")),
        label.encode(x=x_enc("x"), y=y_enc("y"), text="text:N"),
    ]


def _y_max(drawn: pd.DataFrame, y: str, host: HostLine | None) -> float:
    top = float(drawn[y].max()) * 1.15
    if host is not None and host.y <= top * OFF_SCALE:
        top = max(top, host.y * 1.08)
    return max(top, 1e-9)


def overview_scatter(
    df: pd.DataFrame,
    y: str,
    y_title: str,
    y_format: str,
    host: HostLine | None = None,
    ceiling: CeilingLine | None = None,
) -> alt.LayerChart:
    """The Overview chart over `df` (one row per strategy: `strategy`, `kind`, `status`, `wall_s`,
    `pareto`, `y`); `y` is `peak_ratio` or a byte column already scaled to the axis unit; `host`
    draws the host's RAM as a line, `ceiling` the machine's ceiling on the time axis."""
    drawn = df[df["wall_s"].notna() & df[y].notna()]
    points = drawn[drawn["kind"] != REFERENCE].copy()
    x_max = max(float(drawn["wall_s"].max()) * 1.25, ceiling.x * 1.15 if ceiling else 0, 1e-3)
    y_max = _y_max(drawn, y, host)
    x_enc, y_enc = _axes(x_max, y_max, y_title, y_format)
    layers = _reference_layers(drawn[drawn["kind"] == REFERENCE], y, y_format, x_enc, y_enc, x_max)
    if host is not None:
        layers += _host_layers(host, y_max, x_enc, y_enc, x_max)
    if ceiling is not None:
        layers += _ceiling_layers(ceiling, x_enc, y_enc)
    if points.empty:
        return alt.LayerChart(layer=layers).properties(height=HEIGHT)
    points["label"] = points["strategy"] + points["kind"].map(
        lambda k: " · peer" if k == PEER else ""
    )
    points = place_labels(points, "wall_s", y, x_max, y_max)
    layers += _front_layers(points[points["pareto"]], y, x_enc, y_enc, x_max, y_max)
    layers += _point_layers(points, y, y_format, x_enc, y_enc)
    return alt.LayerChart(layer=layers).properties(height=HEIGHT)


def _front_layers(front: pd.DataFrame, y: str, x_enc, y_enc, x_max, y_max) -> list[alt.Chart]:
    """The Pareto staircase and a ring around each of its points."""
    if front.empty:
        return []
    stairs = _staircase(front, "wall_s", y, x_max, y_max)
    line = alt.Chart(stairs).mark_line(color="#333", strokeDash=[6, 3], strokeWidth=2)
    ring = alt.Chart(front).mark_point(
        size=520, color="#333", strokeWidth=1.5, filled=False, shape="circle"
    )
    return [
        line.encode(x=x_enc("wall_s"), y=y_enc(y), order="order:Q"),
        ring.encode(x=x_enc("wall_s"), y=y_enc(y)),
    ]


def _tooltip(points: pd.DataFrame, y: str, y_format: str) -> list[alt.Tooltip]:
    return [
        alt.Tooltip("strategy:N"),
        *([alt.Tooltip("description:N")] if "description" in points else []),
        alt.Tooltip("kind:N"),
        alt.Tooltip("status:N"),
        alt.Tooltip("repeats:Q"),
        alt.Tooltip("wall_s:Q", format=".2f", title="wall s"),
        alt.Tooltip(f"{y}:Q", format=y_format, title="peak over baseline"),
        alt.Tooltip("pareto:N", title="on the Pareto front"),
    ]


def _point_layers(points: pd.DataFrame, y: str, y_format: str, x_enc, y_enc) -> list[alt.Chart]:
    """Leader lines, points (strategies filled, peers hollow) and labels."""
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
            mark = alt.Chart(rows).mark_point(size=150, filled=filled, strokeWidth=2, opacity=0.85)
            enc = mark.encode(x=x_enc("wall_s"), y=y_enc(y), color=color, shape=shape)
            layers.append(enc.encode(tooltip=tooltip))
    text = alt.Chart(points).mark_text(align="left", baseline="middle", fontSize=12, color="#222")
    layers.append(text.encode(x=x_enc("label_x"), y=y_enc("label_y"), text="label:N"))
    return layers
