"""`loader.options`: `load_model`'s options typed by role (issue 55). Each keyword lands in one
group, each group is a strategy's declared unit, and the keywords users pass stay as they were."""

from __future__ import annotations

import inspect

import pytest

import loader
from loader.options import GROUPS, LoadOptions, Reading, Sharing, option_names
from loader.sequence import UNIVERSAL

#: `load_model`'s keywords that are no strategy option: `LoadArgs`' fields and what makes its
#: `policy` (`ignore_unexpected`, `ignore_missing`, `casts`), and the strategy's name.
NOT_OPTIONS = {*UNIVERSAL, "ignore_unexpected", "ignore_missing", "casts", "strategy"}


def test_every_load_model_option_is_in_exactly_one_group():
    keywords = [
        p.name
        for p in inspect.signature(loader.load_model).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in NOT_OPTIONS
    ]
    fields = [name for group in GROUPS for name in option_names((group,))]
    assert sorted(fields) == sorted(keywords)
    assert len(set(fields)) == len(fields)


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
