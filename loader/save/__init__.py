"""Saving: an NNX model to one `.safetensors` file, in its own layout or in the source's.

`write` holds `save_model` and the streamed, atomic writer (one host buffer at a time);
`writeback` plans the source layout from a load's key map (the inverse of each declared
transform), before anything is written.
"""

from loader.save.write import describe_leaf, header_metadata, host_copy, keyed_values, save_model

__all__ = ["describe_leaf", "header_metadata", "host_copy", "keyed_values", "save_model"]
