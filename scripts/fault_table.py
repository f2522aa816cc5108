"""The remote fault table: each fault of the integrity suite, one fresh loading process each.

nginx serves a synthetic checkpoint (`--mb` MB of f32 tensors) on 127.0.0.1 behind the tests'
fault proxy (`tests/faultproxy.py`); for each case the proxy is armed, a fresh process runs
`loader.load_model` through it, and the table says what came back: `ok, bit-exact` (every tensor
compared with the file), `refused` (the error's class and message), or a model that differs from
the file (which must never happen), with the wall time and the child's peak RSS.

    .venv/bin/python scripts/fault_table.py [--mb 84]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

CHILD = """
import json, resource, sys, time
import numpy as np
import loader, shapes
from loader.placement.leaves import iter_variables
url, ckpt, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
builder = shapes.model_builder(shapes.load_spec(ckpt))
t0 = time.perf_counter()
try:
    model, report = loader.load_model(builder, url, strict=True, **options)
except Exception as e:
    out = {"outcome": f"refused ({type(e).__name__})", "message": str(e)}
else:
    wrong = 0
    for path, var in iter_variables(model):
        try:
            shapes.verify_tensor(ckpt, ".".join(map(str, path)), np.asarray(var.get_value()))
        except Exception:  # noqa: BLE001 - a leaf that differs from the file, however said
            wrong += 1
    out = {"outcome": "ok, bit-exact" if not wrong else f"WRONG MODEL ({wrong} leaves differ)",
           "message": f"validator {report.remote.validator}, sha256 {report.remote.digest}, "
                      f"{report.remote.retries} retries"}
out["seconds"] = time.perf_counter() - t0
out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out))
"""


@dataclass
class Case:
    name: str
    arm: Callable[[Any, Any], None] = lambda proxy, server: None
    options: dict[str, Any] = field(default_factory=dict)


def main() -> int:
    from faultproxy import Fault, FaultProxy

    import shapes
    from bench.link.servers import start_nginx

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=84)
    args = parser.parse_args()
    n = args.mb * 1_000_000 // 4 // 8
    spec = shapes.ShapeSpec(
        "fault-table",
        "",
        ("model.safetensors",),
        tuple(
            shapes.TensorSpec(f"layer{i}.weight", "F32", (n // 1024, 1024), "model.safetensors")
            for i in range(8)
        ),
    )
    with tempfile.TemporaryDirectory(prefix="fault-table-") as tmp:
        www = Path(tmp) / "www"
        ckpt = shapes.synthesize(spec, www)
        original = ckpt.read_bytes()
        digest = "sha256:" + hashlib.sha256(original).hexdigest()

        def replace(data: bytes) -> None:
            tmp_file = ckpt.with_name("new")
            tmp_file.write_bytes(data)
            st = ckpt.stat()
            os.replace(tmp_file, ckpt)
            os.utime(ckpt, (st.st_atime + 10, st.st_mtime + 10))

        import numpy as np

        head = 8 + int.from_bytes(original[:8], "little")
        flipped = np.frombuffer(original, np.uint8, offset=head) ^ np.uint8(1)
        changed = original[:head] + flipped.tobytes()  # every tensor byte differs
        cases = [
            Case("no fault"),
            Case(
                "connection cut mid-body (every try)",
                lambda p, s: setattr(p, "fault", Fault("truncate", nth=3)),
            ),
            Case(
                "connection cut once",
                lambda p, s: setattr(p, "fault", Fault("truncate", nth=3, times=1)),
            ),
            Case(
                "500 on the header request, once",
                lambda p, s: setattr(p, "fault", Fault("status500", nth=1, times=1)),
            ),
            Case(
                "503 with Retry-After: 2, once",
                lambda p, s: setattr(p, "fault", Fault("status503", nth=2, times=1)),
            ),
            Case(
                "server ignores Range",
                lambda p, s: setattr(p, "fault", Fault("ignore_range", nth=3)),
            ),
            Case(
                "wrong Content-Range", lambda p, s: setattr(p, "fault", Fault("wrong_range", nth=3))
            ),
            Case("longer body", lambda p, s: setattr(p, "fault", Fault("longer", nth=3))),
            Case(
                "stall after headers (idle_timeout=5)",
                lambda p, s: setattr(p, "fault", Fault("stall", nth=3)),
                {"idle_timeout": 5},
            ),
            Case(
                "stall, default idle timeout",
                lambda p, s: setattr(p, "fault", Fault("stall", nth=3)),
            ),
            Case(
                "trickle, 2 B/s (timeout=10)",
                lambda p, s: setattr(p, "fault", Fault("trickle", nth=3)),
                {"timeout": 10},
            ),
            Case(
                "replaced mid-load, ETag",
                lambda p, s: setattr(p, "on_range", lambda k: replace(changed) if k == 3 else None),
            ),
            Case(
                "replaced mid-load, Last-Modified only",
                lambda p, s: (
                    setattr(p, "strip", {"etag"}),
                    setattr(p, "on_range", lambda k: replace(changed) if k == 3 else None),
                ),
            ),
            Case(
                "no ETag, no Last-Modified",
                lambda p, s: setattr(p, "strip", {"etag", "last-modified"}),
            ),
            Case(
                "no validators, replaced mid-load, digest",
                lambda p, s: (
                    setattr(p, "strip", {"etag", "last-modified"}),
                    setattr(p, "on_range", lambda k: replace(changed) if k == 3 else None),
                ),
                {"digest": digest},
            ),
            Case(
                "no validators, replaced mid-load, unvalidated='allow'",
                lambda p, s: (
                    setattr(p, "strip", {"etag", "last-modified"}),
                    setattr(p, "on_range", lambda k: replace(changed) if k == 3 else None),
                ),
                {"unvalidated": "allow"},
            ),
            Case(
                "byte flipped under the same ETag, digest",
                lambda p, s: setattr(p, "fault", Fault("corrupt", nth=3)),
                {"digest": digest},
            ),
            Case(
                "byte flipped under the same ETag, no digest",
                lambda p, s: setattr(p, "fault", Fault("corrupt", nth=3)),
            ),
        ]
        print("| case | outcome | message | s | peak MiB |")
        print("|---|---|---|---|---|")
        with start_nginx(www) as server:
            for case in cases:
                with FaultProxy(server.url) as proxy:
                    case.arm(proxy, server)
                    began = time.perf_counter()
                    run = subprocess.run(
                        [
                            sys.executable,
                            "-c",
                            CHILD,
                            f"{proxy.url}/{ckpt.name}",
                            str(ckpt),
                            json.dumps({"concurrency": 4, **case.options}),
                        ],
                        capture_output=True,
                        text=True,
                        check=False,
                        timeout=600,
                    )
                    wall = time.perf_counter() - began
                replace(original)
                try:
                    out = json.loads(run.stdout.strip().splitlines()[-1])
                except (IndexError, ValueError):
                    out = {
                        "outcome": "child failed",
                        "message": run.stderr[-300:],
                        "seconds": wall,
                        "peak": 0,
                    }
                message = (
                    out["message"]
                    .replace("|", "/")
                    .replace(server.url, "URL")
                    .replace(proxy.url, "URL")
                )
                print(
                    f"| {case.name} | {out['outcome']} | {message} | {out['seconds']:.1f} | "
                    f"{out['peak'] / 2**20:.0f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
