"""The device check's table: per shape set and strategy, host peak, device peak, GB/s, verdicts.

`python scripts/device_check_report.py OUT.md RESULTS.jsonl...` reads the runs with the bench's
own reader and summary (`bench.analysis.summary.json_summary`), so the figures are the ones
`bench run` printed, and writes a Markdown table plus the issue's targets checked against them:
host peak over baseline <= budget + 0.25 GiB, device peak <= 1.02x the model, >= 25 GB/s,
`pipelined` faster than each peer in the same run, and each port (`--model transposed`, `port`)
within 1.05x of the plain load's time. Nothing in it was measured once and kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

GIB = 1 << 30
DEFAULT_BUDGET = 256 << 20
PEERS = ("runai", "fastsafetensors", "instanttensor")
PORT_TIME_BOUND = 1.05  # a port's load time over the plain load's, on the device


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f} GiB"


def _row(s: dict) -> str:
    over = None if s["peak_rss_bytes"] is None else s["peak_rss_bytes"] - s["baseline_rss_bytes"]
    dev = s.get("device_peak_bytes")
    ratio = "-" if dev is None else f"{dev / s['checkpoint_bytes']:.3f}x"
    tput = s["throughput_bytes_per_s"]
    flag = " +copy" if s.get("device_overreceived") else ""
    return (
        f"| {s['shapes']} | {s['model']} | {s['strategy']} | {s['status']} "
        f"({s['ok_repeats']}/{s['repeats']}) "
        f"| {_gib(over)} | {_gib(dev)} ({ratio}){flag} | "
        f"{'-' if tput is None else f'{tput / 1e9:.2f}'} | {s['wall_s'] or float('nan'):.2f} "
        f"| {s.get('staging_memory') or '-'} |"
    )


def _port_verdicts(summary: list[dict], shapes: str) -> list[str]:
    """Each port's `pipelined` load time against the plain load's on the same shapes."""
    pipelined = {
        s["model"]: s
        for s in summary
        if s["shapes"] == shapes and s["strategy"] == "pipelined" and s["status"] == "ok"
    }
    plain = pipelined.get("spec")
    lines = []
    for model, port in pipelined.items():
        if model == "spec" or plain is None or not plain["wall_s"] or not port["wall_s"]:
            continue
        ratio = port["wall_s"] / plain["wall_s"]
        sign = "<=" if ratio <= PORT_TIME_BOUND else ">"
        lines.append(
            f"- {shapes}: pipelined --model {model} {port['wall_s']:.2f} s = {ratio:.2f}x "
            f"the plain load ({sign} {PORT_TIME_BOUND}x)"
        )
    return lines


def _verdicts(summary: list[dict]) -> list[str]:
    lines = []
    for shapes in dict.fromkeys(s["shapes"] for s in summary):
        rows = {s["strategy"]: s for s in summary if s["shapes"] == shapes and s["model"] == "spec"}
        p = rows.get("pipelined")
        if p is None or p["status"] != "ok":
            lines.append(f"- {shapes}: pipelined did not run ok: no verdicts")
            continue
        budget = p.get("budget_bytes") or DEFAULT_BUDGET
        over = p["peak_rss_bytes"] - p["baseline_rss_bytes"]
        bound = budget + GIB // 4
        sign = "<=" if over <= bound else ">"
        lines.append(
            f"- {shapes}: host peak over baseline {_gib(over)} {sign} budget + 0.25 GiB "
            f"({_gib(bound)})"
        )
        dev = p.get("device_peak_bytes")
        if dev is not None:
            ratio = dev / p["checkpoint_bytes"]
            verdict = "ok" if ratio <= 1.02 else "over 1.02x"
            lines.append(f"- {shapes}: device peak {ratio:.3f}x the model ({verdict})")
        tput = (p["throughput_bytes_per_s"] or 0) / 1e9
        lines.append(f"- {shapes}: {tput:.2f} GB/s ({'>=' if tput >= 25 else '<'} 25 GB/s)")
        for peer in PEERS:
            q = rows.get(peer)
            if q is None or q["status"] != "ok" or q["wall_s"] is None:
                lines.append(
                    f"- {shapes}: {peer} did not run ok ({q['status'] if q else 'absent'})"
                )
            else:
                verdict = "faster" if p["wall_s"] < q["wall_s"] else "slower"
                lines.append(
                    f"- {shapes}: pipelined {p['wall_s']:.2f} s vs {peer} {q['wall_s']:.2f} s "
                    f"({verdict})"
                )
        lines += _port_verdicts(summary, shapes)
    return lines


def main(argv: list[str]) -> int:
    from bench.analysis.summary import json_summary
    from bench.records.results import read_results

    out, files = Path(argv[0]), argv[1:]
    summary = [s for f in files for s in json_summary(read_results(Path(f)))]
    head = [
        "| shapes | model | strategy | status | host peak - baseline | device peak (x model) "
        "| GB/s | wall s | staging |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    text = "\n".join([*head, *map(_row, summary), "", *_verdicts(summary), ""])
    out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
