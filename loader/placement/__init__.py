"""Placement: the model's leaves, and how a host array becomes a leaf's value on its devices.

Below planning (`loader.planning` imports this folder, never the other way): the plan is made of
these leaves and rules, and the executors carry its steps out with them.

- `paths`: a parameter path's file key (`key_of`) and its readable form (`path_str`);
- `leaves`: the model's leaves as the loader sees them (`Leaf`, and its kind, `LeafKind`);
- `casts`: what a dtype change between file and model is, and the value check a narrowing needs;
- `place`: the model's own sharding made concrete, and a host array put on its devices with it;
- `materialize`: a host array read from a file made a leaf's value (transform, cast, device) and
  assigned.
"""
