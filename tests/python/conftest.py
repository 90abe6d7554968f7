"""The server every Python test writes to: the real binary (built by
`cargo build -p chingest-server`) on free loopback ports, with a temporary
data directory and an auth token, for the whole session; and the real
InfluxDB 1.6 some tests compare it with, started on first use.
"""

import json
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = ROOT / "target" / "debug" / "chingest"
INFLUXD = pathlib.Path("/usr/bin/influxd")
TOKEN = "py-secret"


def answers(url, status):
    """A readiness check for `wait_until_up`: whether GET `url` answers
    `status`."""
    def ready():
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                return r.status == status
        except OSError:
            return False
    return ready


def wait_until_up(proc, ready, what, output):
    """Waits up to 30 s until `ready()`; if `proc` exits or the time runs
    out, kills it and fails with `output()` (its log)."""
    deadline = time.time() + 30
    while not ready():
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"{what} did not start: {output()}")
        time.sleep(0.05)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data_dir, *args, binary=BINARY, base="http://127.0.0.1", ready=None):
    """Starts `binary` serving `data_dir` on free loopback ports with `args`
    besides, its writes answered once queryable, and waits until
    `ready(url)` (default: `/ready` answers 200). Returns the process and
    where it listens: `url`, `port`, `grpc`, `clickhouse`, `clickhouse_port`."""
    port, grpc_port, clickhouse_port = free_port(), free_port(), free_port()
    proc = subprocess.Popen(
        [str(binary), "serve", "--data-dir", str(data_dir), "--http-addr", f"127.0.0.1:{port}",
         "--grpc-addr", f"127.0.0.1:{grpc_port}",
         "--clickhouse-http-addr", f"127.0.0.1:{clickhouse_port}", "--log", "warn",
         # Writes are answered once queryable, so each test reads back at once
         # (the default mode, fsync, is covered by the Rust crash tests).
         "--durability", "visible", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    url = f"{base}:{port}"
    ready = ready or (lambda url: answers(f"{url}/ready", 200)())
    wait_until_up(proc, lambda: ready(url), "server", lambda: proc.stdout.read().decode())
    host = base.split("://")[1]
    return proc, {"url": url, "port": port, "grpc": f"{host}:{grpc_port}",
                  "clickhouse": f"http://127.0.0.1:{clickhouse_port}", "clickhouse_port": clickhouse_port}


def stop_server(proc):
    """Stops a server of `start_server`, which must exit cleanly."""
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, proc.stdout.read().decode()


@pytest.fixture(scope="session")
def server():
    assert BINARY.exists(), f"build the server first: {BINARY}"
    data_dir = tempfile.mkdtemp(prefix="chingest-py-")
    proc, where = start_server(data_dir, "--auth-token", TOKEN)
    yield where
    stop_server(proc)
    shutil.rmtree(data_dir, ignore_errors=True)


def sql(server, query):
    params = urllib.parse.urlencode({"query": query, "format": "JSONEachRow"})
    request = urllib.request.Request(
        f"{server['url']}/sql?{params}", headers={"Authorization": f"Token {TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return [json.loads(line) for line in r.read().decode().splitlines()]
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{query}: {e.code} {e.read().decode()}") from None


@pytest.fixture(scope="session")
def influxd():
    """Debian's InfluxDB 1.6 on free loopback ports, with its own data
    directories, the HTTP service and continuous queries (checked every
    second), for the tests that compare chingest with it; its URL."""
    if not INFLUXD.exists():
        pytest.fail(f"{INFLUXD} is missing: `make setup` installs Debian's influxdb package",
                    pytrace=False)
    home = pathlib.Path(tempfile.mkdtemp(prefix="chingest-influxd-"))
    port, rpc = free_port(), free_port()
    (home / "influxdb.conf").write_text(f"""
reporting-enabled = false
bind-address = "127.0.0.1:{rpc}"
[meta]
  dir = "{home}/meta"
  logging-enabled = false
[data]
  dir = "{home}/data"
  wal-dir = "{home}/wal"
  query-log-enabled = false
[monitor]
  store-enabled = false
[subscriber]
  enabled = false
[continuous_queries]
  enabled = true
  run-interval = "1s"
[retention]
  enabled = false
[shard-precreation]
  enabled = false
[http]
  bind-address = "127.0.0.1:{port}"
  log-enabled = false
  pprof-enabled = false
[ifql]
  enabled = false
[[graphite]]
  enabled = false
[[collectd]]
  enabled = false
[[opentsdb]]
  enabled = false
[[udp]]
  enabled = false
[logging]
  level = "warn"
  suppress-logo = true
""")
    # Its log goes to a file: a pipe nobody reads would block it once full.
    log = home / "influxd.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(INFLUXD), "-config", str(home / "influxdb.conf")],
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    wait_until_up(proc, answers(f"{url}/ping", 204), "influxd", log.read_text)
    yield url
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(home, ignore_errors=True)
