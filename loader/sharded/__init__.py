"""Sharded checkpoints: each process reads (and writes) only the slices its devices hold.

- `rule`: the sharding rule (split the largest axis the device count divides; imports no jax at
  module level) and its application to a plan (`apply_rule`).
- `layout`: where each slice of each tensor lives (`Layout`, the sharded directory's manifest),
  and region geometry (`local_regions`, `tiled_box`).
- `reads`: a load's planned reads (`PlannedRead`) and what reads them (`RegionReader`).
- `slices`: the slice reader (any index range of a tensor, from the slices holding it), the
  read-ahead in front of it within `budget=` (`ReadAhead`), and the shard writer.
- `load`: the sharded executor of a `Layout`, this process's index ranges only (or,
  `share="bytes"`, its leading-axis blocks resharded).
- `share`: how processes split a plain checkpoint (`regions`, `bytes`, `auto`: `mode_of`, on
  every process's figures).
- `blocks`: bytes mode: a leading-axis block per process, resharded over the interconnect.
- `read_plan`, `remote`, `files`: a share read in few large requests; a remote or local file.
- `directory`: `save_sharded` / `load_sharded` / `convert_to_sharded`, a directory of shard files.

Importing this package imports no jax; its modules that need jax import it themselves.
"""
