"""Placement: the model's leaves, and how a host array becomes a leaf's value on its devices.

- `leaves`: the model's leaves as the loader sees them (`Leaf`, and its kind, `LeafKind`);
- `place`: the model's own sharding made concrete, and a host array put on its devices with it;
- `materialize`: a host array read from a file made a leaf's value (transform, cast, device) and
  assigned.
"""
