"""The ports checked against the source framework: a tiny HF model built in torch from a config
(random init, no download), saved as HF saves it, loaded into a poisoned NNX model with the port's
key map and strict=True; logits on a fixed input match torch's. Skipped without `transformers`
(`make ports` installs the `ports` extra).
"""

from __future__ import annotations

import json
import shutil
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

import loader
from loader.source_check import compare_to_transformers
from shapes.architectures import bert, declared_for, gpt2, llama, llama_scanned, vit
from tests.conftest import poison_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

FP32_TOLERANCE = 1e-5
IDS = np.random.default_rng(0).integers(0, 97, (1, 16))
IMAGE = np.random.default_rng(0).standard_normal((1, 32, 32, 3)).astype(np.float32)


def _gpt2():
    cfg = transformers.GPT2Config(vocab_size=97, n_positions=32, n_embd=32, n_layer=2, n_head=4)
    return transformers.GPT2LMHeadModel(cfg), gpt2, IDS


def _llama():
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8,
    }
    cfg = transformers.LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        rope_theta=500000.0,
        rope_scaling=scaling,
        tie_word_embeddings=False,
    )
    return transformers.LlamaForCausalLM(cfg), llama, IDS


def _vit():
    cfg = transformers.ViTConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=32,
        patch_size=8,
        num_labels=10,
    )
    return transformers.ViTForImageClassification(cfg), vit, IMAGE


ARCHS = {"gpt2": _gpt2, "llama": _llama, "vit": _vit}


def _torch_logits(hf, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        t = torch.tensor(x)
        out = hf(t.permute(0, 3, 1, 2).to(hf.dtype)) if t.dtype == torch.float32 else hf(t)
    return out.logits.float().numpy()


def _saved(name: str, tmp_path, dtype=None):
    """(HF model, port module, input, checkpoint folder); the model's weights made non-trivial."""
    torch.manual_seed(0)
    hf, port, x = ARCHS[name]()
    with torch.no_grad():  # HF's init is tiny (std 0.02): give every weight a visible spread
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    hf = hf.eval() if dtype is None else hf.to(dtype).eval()
    hf.save_pretrained(tmp_path)
    return hf, port, x, tmp_path


def _config(port, folder):
    return port.config_for(json.loads((folder / "config.json").read_text()), _keys(folder))


def _load(port, folder, *, dtype=jnp.float32, key_map=None, strategy=None):
    config = _config(port, folder)
    target = port.MODEL(config, dtype=dtype, rngs=nnx.Rngs(1))
    poison_model(target)
    key_map = port.key_map(config) if key_map is None else key_map(config)
    return loader.load_model(
        target, folder / "model.safetensors", strict=True, key_map=key_map, strategy=strategy
    )


def _keys(folder) -> list[str]:
    with safe_open(str(folder / "model.safetensors"), "np") as f:
        return list(f.keys())


@pytest.mark.parametrize("strategy", ["pipelined", "hostcast"])
@pytest.mark.parametrize("name", sorted(ARCHS))
def test_port_matches_torch_in_fp32_and_covers_the_checkpoint(name, strategy, tmp_path):
    hf, port, x, folder = _saved(name, tmp_path)
    model, report = _load(port, folder, strategy=strategy)
    key_map = port.key_map(_config(port, folder))
    assert sorted(report.loaded) == sorted(key_map)
    used = {v if isinstance(v, str) else v[0] for v in key_map.values()}
    assert used == set(_keys(folder)) and report.unexpected == []  # every tensor lands somewhere
    got = np.asarray(model(jnp.asarray(x)))
    delta = float(np.max(np.abs(got - _torch_logits(hf, x))))
    print(f"{name} fp32 max |delta| = {delta:.3g}")
    assert delta <= FP32_TOLERANCE


@pytest.mark.parametrize("name", sorted(ARCHS))
def test_port_in_bf16_keeps_the_dtype_and_stays_within_its_rounding(name, tmp_path):
    """bf16 file, bf16 model: no further from torch's fp32 logits than torch's own bf16 run (x2)."""
    hf, port, x, folder = _saved(name, tmp_path, dtype=torch.bfloat16)
    model, report = _load(port, folder, dtype=jnp.bfloat16)
    assert report.ok and report.casts == []
    out = model(jnp.asarray(x))
    assert out.dtype == jnp.bfloat16
    exact = _torch_logits(hf.float(), x)  # the same bf16 weights, computed in fp32
    hf_bf16 = _torch_logits(hf.to(torch.bfloat16), x)
    ours = float(np.max(np.abs(np.asarray(out, np.float32) - exact)))
    theirs = float(np.max(np.abs(hf_bf16 - exact)))
    print(f"{name} bf16 max |delta| = {ours:.3g} (torch bf16: {theirs:.3g})")
    assert ours <= 2 * theirs + 1e-2 * float(np.max(np.abs(exact)))


def test_a_wrong_layout_is_caught_by_the_logits(tmp_path):
    """Without its transpose a square q projection loads (shapes agree), but the logits differ."""
    hf, port, x, folder = _saved("llama", tmp_path)

    def untransposed(config):
        km = port.key_map(config)
        for key, entry in km.items():
            if key.endswith("self_attn.q_proj.kernel"):
                km[key] = (entry[0], entry[1][1:])  # Reshape only: (out, in) read as (in, out)
        return km

    model, _ = _load(port, folder, key_map=untransposed)
    delta = float(np.max(np.abs(np.asarray(model(jnp.asarray(x))) - _torch_logits(hf, x))))
    assert delta > 100 * FP32_TOLERANCE


def _bert(tmp_path, position_ids: bool = True):
    """A tiny `BertModel` as a sentence-embedding checkpoint on the Hub holds it: with its pooler,
    and (`position_ids`) with the `embeddings.position_ids` buffer that transformers persisted
    before 4.31."""
    cfg = transformers.BertConfig(
        vocab_size=97,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    hf = transformers.BertModel(cfg)
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    hf.eval().save_pretrained(tmp_path)
    if position_ids:
        path = tmp_path / "model.safetensors"
        buffer = {"embeddings.position_ids": np.arange(32, dtype=np.int64)[None]}
        save_file(load_file(path) | buffer, str(path), metadata={"format": "pt"})
    return tmp_path


def _bert_inputs():
    rng = np.random.default_rng(0)
    mask = np.ones((2, 16), np.int64)
    mask[1, 11:] = 0  # the second sentence is padded
    ids, types = rng.integers(0, 97, (2, 16)), rng.integers(0, 2, (2, 16))
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}  # Bert's names


def _assert_bert_matches(model, folder) -> None:
    """transformers' `BertModel` from `folder` and the port: both outputs within fp32 noise."""
    result = compare_to_transformers(folder, model, _bert_inputs())
    print(result)
    assert sorted(result.deltas) == ["last_hidden_state", "pooler_output"]
    assert result.ok, str(result)


def _load_bert(folder):
    keys = _keys(folder)
    config = _config(bert, folder)
    target = bert.Bert(config, rngs=nnx.Rngs(1))
    poison_model(target)
    key_map = bert.key_map(config)
    ignored = declared_for(bert.IGNORE_UNEXPECTED, keys)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # one call, no warning at all
        model, report = loader.load_model(
            target,
            folder / "model.safetensors",
            strict=True,
            key_map=key_map,
            ignore_unexpected=ignored,
            ignore_missing=bert.IGNORE_MISSING,
            casts="allow",
        )
    return model, report, key_map, ignored


@pytest.mark.parametrize("position_ids", [True, False], ids=["old-save", "recent-save"])
def test_bert_port_loads_strictly_in_32_bit_jax_and_matches_torch(position_ids, tmp_path):
    """One strict call, with the architecture's declared ignores, in jax's default 32-bit mode."""
    assert not jax.config.jax_enable_x64
    folder = _bert(tmp_path, position_ids)
    model, report, key_map, ignored = _load_bert(folder)
    buffers = ["embeddings.position_ids"] if position_ids else []
    assert ignored == tuple(f"*{k}" for k in buffers)
    assert sorted(report.loaded) == sorted(key_map)
    assert report.ignored == buffers and report.unexpected == [] and report.ok
    _assert_bert_matches(model, folder)


def _nudge(model) -> None:
    """Fine-tune, crudely: every parameter moves, so only the port's own weights give its output."""
    for _, node in nnx.iter_graph(model):
        if isinstance(node, nnx.Param):
            node.set_value(node.get_value() * 1.01 + 0.01)


def _saved_back(model, folder, out, key_map, ignored=()):
    """The port written back in the source layout beside the original config.json."""
    out.mkdir(exist_ok=True)
    shutil.copy(folder / "config.json", out / "config.json")
    source = folder / "model.safetensors"
    loader.save_model(
        model,
        out / "model.safetensors",
        key_map=key_map,
        reference=source,
        ignore_unexpected=ignored,
    )
    saved, src = load_file(out / "model.safetensors"), load_file(source)
    assert sorted(saved) == sorted(src)
    return saved, src


def _bit_equal(saved, src) -> list[str]:
    """The keys whose saved tensor differs from the source's in dtype or in any bit."""
    return [
        k for k in src if saved[k].dtype != src[k].dtype or saved[k].tobytes() != src[k].tobytes()
    ]


@pytest.mark.parametrize("name", [*sorted(ARCHS), "llama-scanned"])
def test_a_port_saved_back_in_the_source_layout_loads_in_transformers(name, tmp_path):
    """Load, save with the same key map: the file is the source's, bit for bit; fine-tuned, it
    loads in transformers (`from_pretrained` on the folder) and gives the port's logits. The
    scanned Llama's stacked leaves go back to HF's per-layer tensors (the Stack's inverse)."""
    hf, port, x, folder = _saved(name.removesuffix("-scanned"), tmp_path / "hf")
    port = llama_scanned if name == "llama-scanned" else port
    model, _ = _load(port, folder)
    key_map = port.key_map(_config(port, folder))
    assert _bit_equal(*_saved_back(model, folder, tmp_path / "back", key_map)) == []
    _nudge(model)
    saved, src = _saved_back(model, folder, tmp_path / "back", key_map)
    assert len(_bit_equal(saved, src)) == len(src)  # every tensor is the port's, none the source's
    back = type(hf).from_pretrained(tmp_path / "back").eval()
    delta = float(np.max(np.abs(np.asarray(model(jnp.asarray(x))) - _torch_logits(back, x))))
    print(f"{name} saved back, fine-tuned: transformers vs port max |delta| = {delta:.3g}")
    assert delta <= FP32_TOLERANCE


def test_bert_saved_back_keeps_the_ignored_buffer_from_the_reference(tmp_path):
    folder = _bert(tmp_path / "hf")
    model, _, key_map, ignored = _load_bert(folder)
    saved, src = _saved_back(model, folder, tmp_path / "back", key_map, ignored)
    assert _bit_equal(saved, src) == []
    _nudge(model)
    saved, src = _saved_back(model, folder, tmp_path / "back", key_map, ignored)
    assert _bit_equal(saved, src) == [k for k in src if k != "embeddings.position_ids"]
    _assert_bert_matches(model, tmp_path / "back")


def test_scanned_llama_loads_through_stack_bit_exact_with_the_unscanned_port(tmp_path):
    """The scanned port (layers stacked by nnx.vmap, run by nnx.scan), strict, from HF's per-layer
    file: each stacked leaf is the unscanned port's layer leaves, bit for bit; the logits are the
    unscanned port's and torch's."""
    from bench.child.models import verify_mapped
    from loader.keys import key_of
    from loader.leaves import iter_variables

    hf, port, x, folder = _saved("llama", tmp_path)
    model, report = _load(llama_scanned, folder)  # pipelined (each strategy: test_stack.py)
    flat, _ = _load(port, folder)
    config = _config(port, folder)
    assert report.ok and sorted(report.loaded) == sorted(llama_scanned.key_map(config))
    assert len(report.stacked) == 9 and report.unexpected == []  # 9 per-layer parameters
    flat_leaves = {key_of(p): np.asarray(v.get_value()) for p, v in iter_variables(flat)}
    layers = config.num_hidden_layers
    for path, var in iter_variables(model):
        key, got = key_of(path), np.asarray(var.get_value())
        if key.startswith("model.layers."):
            name = key[len("model.layers.") :]
            want = np.stack([flat_leaves[f"model.layers.{i}.{name}"] for i in range(layers)])
        else:
            want = flat_leaves[key]
        np.testing.assert_array_equal(got, want, err_msg=key)
    logits = np.asarray(model(jnp.asarray(x)))
    flat_logits = np.asarray(flat(jnp.asarray(x)))
    delta = float(np.max(np.abs(logits - _torch_logits(hf, x))))
    print(
        f"scanned llama fp32 max |delta| = {delta:.3g}, against the unscanned port: "
        f"{float(np.max(np.abs(logits - flat_logits))):.3g}"
    )
    # the weights are bit-equal (above); a scanned forward compiles to another order of float
    # operations than the unrolled one, so logits near 1 may differ in their last bits (1.1e-6
    # seen with jax 0.10.2 on these VMs): held to the same fp32 tolerance as torch's
    np.testing.assert_allclose(logits, flat_logits, rtol=0, atol=FP32_TOLERANCE)
    assert delta <= FP32_TOLERANCE
    key_map = llama_scanned.key_map(config)  # what `bench run --model port-scanned` verifies
    assert verify_mapped(model, str(folder / "model.safetensors"), key_map) == (len(key_map), None)
