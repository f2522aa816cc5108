"""The plan: what a load will do, worked out from the model and the checkpoint's headers alone.

- `plan`: the plan's types (`Source`, `Step`, `LoadPlan`, `PlanEntry`, `Stacked`, `StackLayer`),
  which every executor reads;
- `match`: `plan_load`, each model leaf matched to its file key and every mismatch reported;
- `keys`: model paths as keys, and `key_map` lookups (renames, declared transforms, stacks);
- `policy`: the declared ignores and the cast policy (which casts are exact or expected:
  `loader.placement.casts`);
- `stacking`: a stacked leaf (`loader.Stack`) checked and cut into one step per layer;
- `dryrun`: `loader.plan`, the plan as a table, no tensor read;
- `source_check`: `loader.compare_to_transformers`, a port's outputs against the source model's.
"""
