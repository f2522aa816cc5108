"""Real architectures in NNX, each with a key map from its Hugging Face checkpoints.

One module per architecture (`gpt2`, `llama`, `vit`), each defining `Config` (`Config.from_hf`
reads a `config.json` dict), the model (`MODEL`), `PRESET_CONFIGS` (the config.json values of
the presets it ports), `config_for(hf, file_keys)`, `key_map(config)` (model state path -> HF
key, or (HF key, `loader.Transpose` / `Reshape` / `Slice` or a tuple of them)) and
`example_input(config)` (the forward's declared input). `port_for(preset)` (in `shapes.
architectures.port`, which imports jax) bundles them for one preset; this module imports nothing
heavy, so listing the presets that have a port stays light.
"""

from __future__ import annotations

#: preset -> architecture module (`shapes.architectures.<module>`)
ARCHITECTURES = {"gpt2": "gpt2", "tiny-gpt2": "gpt2", "llama3-8b": "llama", "vit-base": "vit"}


def port_names() -> list[str]:
    """The presets that have a real architecture (`bench run --model port` accepts these)."""
    return sorted(ARCHITECTURES)
