"""`loader.compare_to_transformers`: the user's check of a port against the source framework.

A square attention weight loaded without its transpose passes a strict load (the shapes agree)
but not this check; the correct port passes it. Without torch or transformers the helper says
how to install them.
"""

from __future__ import annotations

import sys

import jax.numpy as jnp
import numpy as np
import pytest

import loader
from loader.planning.source_check import FP32_TOLERANCE, compare_to_transformers


def _llama(tmp_path):
    pytest.importorskip("transformers")
    from tests.unit import test_ports

    hf, port, ids, folder = test_ports._saved("llama", tmp_path)
    return port, folder, {"input_ids": np.asarray(ids)}


def _untransposed_q(port):
    def key_map(config):
        km = port.key_map(config)
        for key, entry in km.items():
            if key.endswith("self_attn.q_proj.kernel"):  # (out, in) read as (in, out)
                km[key] = (entry[0], entry[1][1:])
        return km

    return key_map


def test_a_square_weight_left_untransposed_is_caught_and_the_right_port_passes(tmp_path):
    from tests.unit import test_ports

    port, folder, inputs = _llama(tmp_path)
    model, report = test_ports._load(port, folder)
    right = compare_to_transformers(folder, lambda input_ids: model(input_ids), inputs)
    print(right)
    assert right.ok and list(right.deltas) == ["logits"]
    assert right.deltas["logits"] <= FP32_TOLERANCE
    wrong_model, wrong_report = test_ports._load(port, folder, key_map=_untransposed_q(port))
    assert wrong_report.ok  # the strict load cannot see it
    wrong = compare_to_transformers(folder, lambda input_ids: wrong_model(input_ids), inputs)
    print(wrong)
    assert not wrong.ok and wrong.deltas["logits"] > 1000 * FP32_TOLERANCE
    assert "OVER" in str(wrong) and "logits" in str(wrong)


def test_outputs_are_matched_by_name_and_shape(tmp_path):
    port, folder, inputs = _llama(tmp_path)
    zeros = jnp.zeros((1, 16, 97))
    by_name = compare_to_transformers(folder, lambda input_ids: {"logits": zeros}, inputs)
    assert not by_name.ok and by_name.outputs[0].max_abs_source > 0
    with pytest.raises(ValueError, match="'hidden' is not among the outputs of LlamaForCausalLM"):
        compare_to_transformers(folder, lambda input_ids: {"hidden": zeros}, inputs)
    with pytest.raises(ValueError, match=r"output 'logits': the port gives shape \(1, 16\)"):
        compare_to_transformers(folder, lambda input_ids: zeros[..., 0], inputs)


def test_last_hidden_state_runs_the_base_model_and_the_title_says_both_dtypes(tmp_path):
    """config.json names a head class (LlamaForCausalLM); a port giving `last_hidden_state` is
    compared with the base model (LlamaModel), and a bf16 port is titled as such."""
    torch = pytest.importorskip("torch")  # the ports extra (make ports-deps); skipped without it
    pytest.importorskip("transformers")
    from tests.unit import test_ports

    hf, _, ids, folder = test_ports._saved("llama", tmp_path)
    with torch.no_grad():
        hidden = hf.model(torch.as_tensor(np.asarray(ids))).last_hidden_state.numpy()
    inputs = {"input_ids": np.asarray(ids)}
    same = compare_to_transformers(
        folder, lambda input_ids: {"last_hidden_state": jnp.asarray(hidden)}, inputs
    )
    assert same.model_class == "LlamaModel" and same.ok
    assert "(float32) against the port (float32)" in str(same)
    bf16 = compare_to_transformers(
        folder,
        lambda input_ids: jnp.asarray(hidden, jnp.bfloat16),
        inputs,
        outputs=["last_hidden_state"],
    )
    assert bf16.model_class == "LlamaModel"
    assert "LlamaModel from" in str(bf16) and "(float32) against the port (bfloat16)" in str(bf16)
    with pytest.raises(ValueError, match=r"pass model_class= .*'BertModel', gives last_hidden"):
        compare_to_transformers(
            folder,
            lambda input_ids: {"last_hidden_state": jnp.asarray(hidden)},
            inputs,
            model_class="LlamaForCausalLM",
        )


def test_without_the_ports_extra_it_names_the_make_target(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"make ports-deps") as err:
        loader.compare_to_transformers("any-folder", lambda **_: None, {})
    assert "transformers" in str(err.value)
