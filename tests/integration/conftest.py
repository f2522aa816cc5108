"""The remote-load fixtures (real servers on 127.0.0.1), for the tests of this folder."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from remote_servers import checkpoints, fake_gcs, hub, moto, nginx  # noqa: E402

__all__ = ["checkpoints", "fake_gcs", "hub", "moto", "nginx"]
