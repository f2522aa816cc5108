"""A results folder for the URL round trips (`test_dashboard_url` headless, `test_url_browser` in
Chromium), and what each page is set to there.

The fixture runs (`fixture_results`: two machines, two shape sets, 2 and 8 devices, a memray
capture) beside a local and a remote run (`fixture_remote`: over s3 at concurrency 1 and 64), so
that every widget of every page is drawn and can take a value other than its default.

`SCENARIOS` sets each page, widget by widget, away from its defaults; a page whose widgets exclude
each other (the Target host's shape sources) has a scenario for each. `LEFT` names the widgets a
scenario leaves at their default, and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixture_remote import write_remote
from fixture_results import write_results


@dataclass(frozen=True)
class UrlFixture:
    """The folder and its runs (`alpha`, `beta`, ... and `remote_local`, `remote_remote`)."""

    root: Path
    run_ids: dict[str, str]

    def result_id(self, run: str, strategy: str, **where: Any) -> str:
        """The id of a child run of `run` and `strategy` whose rows hold `where` (`repeat=1`)."""
        from bench.records.results import read_results

        p = read_results(self.root).phases
        mine = p[(p["run_id"] == self.run_ids[run]) & (p["strategy"] == strategy)]
        for column, value in where.items():
            mine = mine[mine[column] == value]
        return str(mine["result_id"].iloc[0])


def write_url(root: Path) -> UrlFixture:
    """Write both fixtures into `root`."""
    runs = write_results(root).run_ids
    remote = write_remote(root).run_ids
    return UrlFixture(root, {**runs, **{f"remote_{k}": v for k, v in remote.items()}})


@dataclass(frozen=True)
class Scenario:
    """One page set away from its defaults: `changes` are (widget kind, key, value) in order, or
    (kind, key, value, text) where a browser picks the option by a text other than the value's
    (a capture's label, not its id); `left` the widgets left at their default, with the reason."""

    page: str
    changes: list[tuple[Any, ...]]
    left: dict[str, str]


NAMES = (
    "overview",
    "phases",
    "timeline",
    "target_measured",
    "target_spec",
    "target_custom",
    "compare",
    "history",
    "history_routes",
    "memray",
)


# The Target host's widgets that every shape source draws (set in its `target_measured` scenario).
MEASURED_TARGET = ("target_ram_gib", "target_devices", "target_accelerator", "target_link")


def scenarios(fx: UrlFixture) -> dict[str, Scenario]:
    """Every page's scenarios, by name."""
    beta, alpha = fx.run_ids["beta"], fx.run_ids["alpha"]
    two_devices = "native, 2 device(s), model spec"
    c64 = {"concurrency": 64, "repeat": 0}
    stream = fx.result_id("beta", "stream", shapes="gpt2", repeat=1, devices=8)
    return {
        "overview": Scenario(
            "views/overview.py",
            [
                ("selectbox", "overview_run", beta),
                ("number_input", "overview_ram_gib", 3.5),
                ("selectbox", "overview_config_gpt2", two_devices),
                ("multiselect", "overview_strategies", ["eager", "floor", "stream"]),
                ("radio", "overview_unit", "x checkpoint"),
                ("toggle", "overview_log", False),
            ],
            {"overview_shapes": "gpt2 is the one shape set measured in two configurations"},
        ),
        "phases": Scenario(
            "views/phases.py",
            [
                ("selectbox", "phases_run", beta),
                ("selectbox", "phases_devices", 2),
                ("multiselect", "phases_strategies", ["eager"]),
            ],
            {
                "phases_shapes": "gpt2 is the one shape set measured on 2 devices",
                "phases_dtype": "one dtype in every run",
            },
        ),
        "timeline": Scenario(
            "views/timeline.py",
            [
                ("selectbox", "timeline_run", beta),
                ("multiselect", "timeline_results", [stream], ["stream · gpt2 · r2 · 8 dev · ok"]),
                ("toggle", "timeline_absolute", True),
                ("toggle", "timeline_stack", True),
            ],
            {},
        ),
        "target_measured": Scenario(
            "views/target_host.py",
            [
                ("number_input", "target_ram_gib", 3.5),
                ("number_input", "target_devices", 1),
                ("selectbox", "target_shapes", "tiny-gpt2"),
                ("toggle", "target_accelerator", True),
                ("number_input", "target_device_ram_gib", 24.0),
                ("text_input", "target_link", "10Gbit"),
            ],
            {"target_source": "set in `target_spec` and `target_custom`"},
        ),
        "target_spec": Scenario(
            "views/target_host.py",
            [
                ("radio", "target_source", "a preset or fetched spec"),
                ("selectbox", "target_spec", "gpt2"),
            ],
            {k: "set in `target_measured`" for k in MEASURED_TARGET},
        ),
        "target_custom": Scenario(
            "views/target_host.py",
            [
                ("radio", "target_source", "custom sizes"),
                ("number_input", "target_ckpt_gib", 2.5),
                ("number_input", "target_largest_mib", 300.0),
                ("number_input", "target_tensors", 500),
            ],
            {k: "set in `target_measured`" for k in MEASURED_TARGET},
        ),
        "compare": Scenario(
            "views/compare.py",
            [
                ("selectbox", "compare_new", beta),
                ("selectbox", "compare_base", alpha),
                ("number_input", "compare_threshold", 7.5),
            ],
            {},
        ),
        "history": Scenario(
            "views/history.py",
            [
                ("selectbox", "history_shapes", "tiny-gpt2"),
                ("multiselect", "history_strategies", ["pipelined", "stream"]),
                ("radio", "history_metric", "peak_over_baseline_bytes", "peak over baseline"),
            ],
            {},
        ),
        "history_routes": Scenario(
            "views/history.py",
            [
                (
                    "multiselect",
                    "history_routes",
                    ["local", "s3 · 1Gbit · c64"],
                    ["local disk", "s3 · 1Gbit · c64"],
                ),
                ("radio", "history_metric", "wall_s", "wall time"),
            ],
            {
                "history_shapes": "gpt2 is the one shape set loaded over several routes",
                "history_strategies": "set in the scenario `history`",
            },
        ),
        "memray": Scenario(
            "views/memray.py",
            [
                (
                    "selectbox",
                    "memray_capture",
                    fx.result_id("remote_remote", "pipelined", **c64),
                    "pipelined · s3 · 1Gbit · c64",
                ),
                ("toggle", "memray_inline", True),
            ],
            {},
        ),
    }
