"""Real servers for remote loads: nginx for `https://`-style URLs, moto's S3 server for `s3://`.

Each is a child process of this one, on an address the run owns (127.0.0.1, or an address inside
the run's own namespace: `netns`), with its files under a folder the caller gives. A server is
stopped (terminated, then killed) by `Server.stop`, which a `with` block calls on any exit.
Waiting for a server to listen is bounded (`START_TIMEOUT_S`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.errors import BenchError

START_TIMEOUT_S = 20.0
S3_CREDENTIALS = {  # moto accepts any; these are the test ones its docs use
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}
BUCKET = "loadbench"


@dataclass
class Server:
    """A server child process and the base URL it answers on."""

    url: str
    process: subprocess.Popen[bytes]
    workdir: Path
    owned: list[Path] = field(default_factory=list)

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL after 5 s) and remove its work folder."""
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(5)
        self._signal(signal.SIGKILL)  # any worker its master left behind
        shutil.rmtree(self.workdir, ignore_errors=True)

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
    server = Server(f"http://{host}:{port}", process, workdir)
    try:
        _wait_listening(host, port, process, "nginx")
    except BaseException:
        server.stop()
        raise
    return server


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
    try:
        _wait_listening(host, port, process, "moto's S3 server")
    except BaseException:
        server.stop()
        raise
    return server


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
def s3_environment(endpoint: str) -> Iterator[None]:
    """`AWS_ENDPOINT_URL` and the test credentials set for the block (restored after)."""
    saved = {k: os.environ.get(k) for k in [*S3_CREDENTIALS, "AWS_ENDPOINT_URL"]}
    os.environ.update({**S3_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
