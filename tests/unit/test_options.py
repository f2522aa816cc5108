"""`loader.options`: `load_model`'s options typed by role (issue 55). Each keyword lands in one
group, each group is a strategy's declared unit, and the keywords users pass stay as they were."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import loader
import shapes
from loader.options import (
    GROUPS,
    TABLE,
    LoadOptions,
    OptionKeywords,
    Reading,
    Sharing,
    option_names,
)
from loader.placement.leaves import iter_variables
from loader.sequence import UNIVERSAL

#: `load_model`'s keywords that are no strategy option: `LoadArgs`' fields and what makes its
#: `policy` (`ignore_unexpected`, `ignore_missing`, `casts`), and the strategy's name.
NOT_OPTIONS = {*UNIVERSAL, "ignore_unexpected", "ignore_missing", "casts", "strategy", "options"}


def test_every_load_model_option_is_in_exactly_one_group():
    """`load_model`'s own keywords are those every strategy takes; the options' keywords (its
    shim for `options=`) are `OptionKeywords`, each a group's field of the same type."""
    keywords = [
        p.name
        for p in inspect.signature(loader.load_model).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    ]
    assert set(keywords) == NOT_OPTIONS - {"policy"}  # `policy`: made of ignores and casts
    fields = [name for group in GROUPS for name in option_names((group,))]
    assert sorted(fields) == sorted(OptionKeywords.__annotations__)
    assert len(set(fields)) == len(fields)
    typed = {f.name: f.type for g in GROUPS.values() for f in dataclasses.fields(g)}
    assert {k: typed[k] for k in OptionKeywords.__annotations__} == {
        k: v.__forward_arg__ if hasattr(v, "__forward_arg__") else v
        for k, v in OptionKeywords.__annotations__.items()
    }


def test_keywords_go_to_their_groups_and_none_is_not_given():
    options = LoadOptions.of(budget=1 << 20, share="bytes", digest=None, concurrency=4)
    assert options.reading == Reading(budget=1 << 20)
    assert options.sharing == Sharing(share="bytes")
    assert options.given() == {"budget": 1 << 20, "concurrency": 4, "share": "bytes"}
    with pytest.raises(TypeError, match="budgt"):
        LoadOptions.of(budgt=1)


def test_a_declaration_names_groups_or_one_field_of_a_group():
    assert option_names(("sharing",)) == ("share", "max_over_read")
    assert option_names(("reading.budget", "remote")) == ("budget", "concurrency", "cache_dir")
    for wrong in ("budget", "reading.share", "readings"):
        with pytest.raises(ValueError, match=wrong):
            option_names((wrong,))


def test_each_group_field_is_one_table_row_of_that_group():
    rows = {(o.group, o.name) for o in TABLE}
    assert len(rows) == len(TABLE)
    fields = {(g, f.name) for g, group in GROUPS.items() for f in dataclasses.fields(group)}
    assert fields == rows


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"budget": 0}, r"budget=0: give a whole number of bytes"),
        ({"threads": True}, r"threads=True: give a whole number"),
        ({"cache_policy": "lru"}, r"cache_policy='lru': give one of"),
        ({"share": "rows"}, r"share='rows': give one of"),
        ({"concurrency": 0}, r"concurrency=0"),
        ({"timeout": -1}, r"timeout=-1: give a number of seconds"),
        ({"staging": "yes"}, r"staging='yes'"),
    ],
)
def test_a_group_refuses_a_bad_value_in_one_line_when_made(given, message):
    with pytest.raises(loader.CheckpointError, match=message) as caught:
        LoadOptions.of(**given)
    assert "\n" not in str(caught.value)


def test_a_value_not_given_is_the_rows_default():
    assert Reading().value("cache_policy") == "auto"
    assert Reading().value("budget") == 256 << 20
    assert Sharing(share="bytes").value("share") == "bytes"


def test_load_model_takes_the_groups_or_the_keywords_not_both(tmp_path):
    with pytest.raises(TypeError, match="options= or the keywords budget, not both"):
        loader.load_model(
            object(), tmp_path / "x.safetensors", options=LoadOptions(), budget=1 << 20
        )


SPEC = shapes.ShapeSpec(
    "options",
    "",
    ("model.safetensors",),
    tuple(
        shapes.TensorSpec(f"l{i}.weight", "F32", (64, 48), "model.safetensors") for i in range(3)
    ),
)


def test_the_groups_reach_the_engine_as_the_keywords_do(tmp_path):
    """`options=` and the keywords build one `LoadOptions`: a builder (no value but the file's)
    loads the same through both, and a budget too small for its readers is refused by both."""
    folder = shapes.synthesize(SPEC, tmp_path)
    path = folder / "model.safetensors" if folder.is_dir() else folder
    grouped = LoadOptions(reading=Reading(threads=2, cache_policy="keep"))
    model, report = loader.load_model(shapes.model_builder(SPEC), path, options=grouped)
    for leaf, var in iter_variables(model):
        shapes.verify_tensor(path, ".".join(map(str, leaf)), np.asarray(var.get_value()))
    assert not report.missing
    tiny = LoadOptions(reading=Reading(budget=4096, threads=2))
    for route in ({"options": tiny}, tiny.given()):
        with pytest.raises(loader.CheckpointError, match="budget"):
            loader.load_model(shapes.model_builder(SPEC), path, **route)
