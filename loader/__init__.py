"""loadbench's loader: streaming, sharding-aware NNX <-> safetensors save and load.

Public API:
    save_model(model_or_state, path, *, metadata=None)
    load_model(target, path, *, strict=False, key_map=None, strategy=None) -> (model, LoadReport)
    save_sharded(model, folder) / load_sharded(target, folder, ...)
    LoadReport, CheckpointError (and its subclasses), strategies (the registry)
"""

from loader.errors import CheckpointError, HeaderError, IncompleteCheckpointError, MismatchError
from loader.load import load_model
from loader.report import LoadReport, LoadWarning
from loader.save import save_model

__all__ = [
    "CheckpointError",
    "HeaderError",
    "IncompleteCheckpointError",
    "LoadReport",
    "LoadWarning",
    "MismatchError",
    "load_model",
    "save_model",
]
