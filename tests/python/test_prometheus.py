"""Prometheus remote write from real senders, read back through /sql:
OpenTelemetry's Prometheus remote-write exporter (PyPI), run from its own
virtualenv (`make setup` makes .venv-otel), writes a counter and a gauge;
and Prometheus itself (Debian's package, which `make setup` installs)
scrapes itself and chingest, remote-writes everything, and what chingest
stored is compared with what Prometheus's HTTP API reports.
"""

import json
import math
import pathlib
import struct
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import ROOT, TOKEN, answers, free_port, sql, wait_until_up

VENV_PYTHON = ROOT / ".venv-otel" / "bin" / "python"
SENDER = pathlib.Path(__file__).with_name("promrw_sender.py")


def test_opentelemetry_remote_write_exporter_lands_its_samples(server):
    assert VENV_PYTHON.exists(), f"run `make setup` first: {VENV_PYTHON} is missing"
    url = f"{server['url']}/api/v1/write?db=py_prom&durability=visible"
    sent = subprocess.run([str(VENV_PYTHON), str(SENDER), url, TOKEN],
                          capture_output=True, text=True, timeout=60)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    rows = sql(server, "SELECT __name__ AS name, route, queue, value FROM py_prom.prometheus "
                       "ORDER BY name, route")
    by_series = {(r["name"], r["route"] or r["queue"]): r["value"] for r in rows}
    counters = {route: v for (name, route), v in by_series.items() if name.startswith("requests")}
    assert counters == {"/a": 5.0, "/b": 2.0}, rows
    gauges = [v for (name, _), v in by_series.items() if name.startswith("queue_depth")]
    assert gauges == [7.0], rows


# --- A real Prometheus: Debian's package (`make setup` installs it) scrapes
# itself and chingest's /metrics every second and remote-writes everything to
# chingest; what chingest stored is compared with what Prometheus reports on
# its own HTTP API.

PROMETHEUS = pathlib.Path("/usr/bin/prometheus")
PROM_DB = "py_prom_real"
# The NaN Prometheus writes as a stale marker (a series gone from a scrape);
# its range queries leave these out, chingest keeps them.
STALE_NAN_BITS = 0x7FF0000000000002


def get_json(url, **params):
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            answer = json.loads(r.read())
    except urllib.error.HTTPError as e:
        pytest.fail(f"GET {url}: {e.code} {e.read().decode(errors='replace')}")
    assert answer["status"] == "success", answer
    return answer["data"]


def query(server, text):
    """conftest's sql, failing with chingest's answer when it is not 200."""
    try:
        return sql(server, text)
    except urllib.error.HTTPError as e:
        pytest.fail(f"/sql {text!r}: {e.code} {e.read().decode(errors='replace')}")


def table_exists(server, table, column=None):
    """Whether `table` (with `column`, if named) is in the catalog yet. A
    view is made with its table, then remade with the tag columns a write's
    new series bring, before any of its rows are queryable."""
    named = f"AND name = '{column}' " if column else ""
    return bool(query(server, f"SELECT 1 FROM system.columns WHERE database = '{PROM_DB}' "
                              f"AND table = '{table}' {named}LIMIT 1"))


def remote_write_errors(log_path):
    lines = log_path.read_text(errors="replace").splitlines()
    return "\n".join(line for line in lines if "component=remote" in line and "level=error" in line)


@pytest.fixture
def prometheus(server, tmp_path):
    """/usr/bin/prometheus on a free port, with its config and storage in a
    temporary directory, scraping itself and `server` every second and
    remote-writing to `server` (database PROM_DB) with short deadlines."""
    assert PROMETHEUS.exists(), (
        f"{PROMETHEUS} is missing: `make setup` installs Debian's prometheus package")
    port = free_port()
    chingest = server["url"].removeprefix("http://")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]},
            # /metrics is open unless metrics_require_token is set; the
            # token does no harm either way.
            {"job_name": "chingest", "authorization": {"credentials": TOKEN},
             "static_configs": [{"targets": [chingest]}]},
        ],
        "remote_write": [{
            "url": f"{server['url']}/api/v1/write?db={PROM_DB}",
            "authorization": {"credentials": TOKEN},
            "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms",
                             "max_backoff": "1s"},
            "metadata_config": {"send": True, "send_interval": "1s"},
        }],
    }
    config_path = tmp_path / "prometheus.yml"
    config_path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    log_path = tmp_path / "prometheus.log"
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(PROMETHEUS), f"--config.file={config_path}",
             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_up(proc, answers(f"{url}/-/ready", 200), "prometheus",
                      lambda: "\n" + log_path.read_text())
        yield {"url": url, "log": log_path}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def eventually(check, timeout, what, prometheus):
    """Calls `check` (which returns None when satisfied, or a description of
    what is still wrong) until it is satisfied or `timeout` seconds pass;
    the failure shows the errors Prometheus logged about its remote writes."""
    deadline = time.time() + timeout
    while True:
        problem = check()
        if problem is None:
            return
        if time.time() > deadline:
            pytest.fail(f"{what}: {problem}\nPrometheus's remote-write errors:\n"
                        f"{remote_write_errors(prometheus['log'])}")
        time.sleep(0.5)


def stored_samples(server, until_ms):
    """chingest's rows up to `until_ms`: {labels: {ms: value bits}}, labels
    a frozenset of (name, value) without the empty columns of other series."""
    columns = [r["name"] for r in query(
        server, f"SELECT name FROM system.columns WHERE database = '{PROM_DB}' "
                "AND table = 'prometheus' ORDER BY position")]
    labels = [c for c in columns if c not in ("time", "value")]
    assert "__name__" in labels, columns
    rows = query(server, "SELECT {}, toUnixTimestamp64Milli(time) AS ms, "
                         "reinterpretAsUInt64(value) AS bits FROM {}.prometheus "
                         "WHERE toUnixTimestamp64Milli(time) <= {}".format(
                             ", ".join(f"`{c}`" for c in labels), PROM_DB, until_ms))
    series = {}
    for row in rows:
        key = frozenset((c, row[c]) for c in labels if row[c] != "")
        samples = series.setdefault(key, {})
        assert row["ms"] not in samples, f"stored twice: {dict(key)} at {row['ms']}"
        samples[row["ms"]] = row["bits"]
    return series


def reported_samples(prometheus, until_ms):
    """Every raw sample Prometheus holds up to `until_ms`, from a range
    selector on /api/v1/query, in the shape of stored_samples."""
    result = get_json(f"{prometheus['url']}/api/v1/query",
                      query='{__name__=~".+"}[1h]', time=f"{until_ms / 1000:.3f}")
    series = {}
    for s in result["result"]:
        series[frozenset(s["metric"].items())] = {
            round(t * 1000): float_bits(float(v)) for t, v in s["values"]}
    return series


def float_bits(value):
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def bits_float(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def same_value(stored_bits, reported_bits):
    # Prometheus's JSON writes every NaN as "NaN": compare NaNs as NaNs.
    a, b = bits_float(stored_bits), bits_float(reported_bits)
    return (math.isnan(a) and math.isnan(b)) or stored_bits == reported_bits


def diff_samples(stored, reported):
    """None when both hold the same series with the same samples (stale
    markers aside), else what differs."""
    problems = []
    for key in reported.keys() - stored.keys():
        problems.append(f"missing series {dict(key)} ({len(reported[key])} samples)")
    for key in stored.keys() - reported.keys():
        live = {ms: b for ms, b in stored[key].items() if b != STALE_NAN_BITS}
        if live:
            problems.append(f"series Prometheus does not have: {dict(key)} {live}")
    for key in stored.keys() & reported.keys():
        mine = {ms: b for ms, b in stored[key].items() if b != STALE_NAN_BITS}
        theirs = reported[key]
        if mine.keys() != theirs.keys():
            problems.append(f"{dict(key)}: timestamps missing "
                            f"{sorted(theirs.keys() - mine.keys())}, "
                            f"extra {sorted(mine.keys() - theirs.keys())}")
        wrong = [(ms, bits_float(mine[ms]), bits_float(theirs[ms]))
                 for ms in sorted(mine.keys() & theirs.keys())
                 if not same_value(mine[ms], theirs[ms])]
        if wrong:
            problems.append(f"{dict(key)}: values (ms, stored, reported) {wrong[:5]}")
    if problems:
        return f"{len(problems)} differences, e.g.\n" + "\n".join(sorted(problems)[:20])
    return None


def test_real_prometheus_remote_write_matches_its_own_api(server, prometheus):
    started = time.time()

    # Prometheus scrapes both targets successfully.
    def targets_up():
        targets = get_json(f"{prometheus['url']}/api/v1/targets")["activeTargets"]
        health = {t["labels"]["job"]: (t["health"], t["lastError"]) for t in targets}
        return None if health == {"prometheus": ("up", ""), "chingest": ("up", "")} else health
    eventually(targets_up, 30, "targets not up", prometheus)

    # chingest receives `up` from both jobs, several scrapes' worth.
    def up_received():
        # The view exists from the first write on, its `job` column from
        # the first series that has the label.
        if not table_exists(server, "prometheus", "job"):
            return f"no {PROM_DB}.prometheus with a job column yet"
        rows = query(server, "SELECT job, count() AS n FROM {}.prometheus "
                             "WHERE __name__ = 'up' GROUP BY job".format(PROM_DB))
        jobs = {r["job"]: r["n"] for r in rows}
        if jobs.keys() == {"prometheus", "chingest"} and min(jobs.values()) >= 8:
            return None
        return f"`up` rows by job: {jobs}"
    eventually(up_received, 30, "too few samples in chingest", prometheus)
    last = {r["job"]: int(r["last"]) for r in query(
        server, f"SELECT job, max(toUnixTimestamp64Milli(time)) AS last "
                f"FROM {PROM_DB}.prometheus WHERE __name__ = 'up' GROUP BY job")}
    # Scrapes are committed within their 1 s timeout: whatever was scraped
    # 2 s before the newest `up` both jobs have delivered is written already
    # or on its way (shards send in parallel, hence `eventually`).
    cutoff = min(last.values()) - 2000

    # Every series with every sample up to the cutoff: the same label sets,
    # timestamps (ms) and values (bit for bit, NaNs as NaNs) on both sides.
    reported = reported_samples(prometheus, cutoff)
    assert len(reported) > 200, f"Prometheus reports only {len(reported)} series"
    eventually(lambda: diff_samples(stored_samples(server, cutoff), reported), 20,
               f"chingest's samples up to {cutoff} differ from Prometheus's", prometheus)
    stored = stored_samples(server, cutoff)

    # A few series by name, for what they say.
    def series(**labels):
        want = set(labels.items())
        return {dict(k)["job"]: v for k, v in stored.items() if want <= k}
    ups = series(__name__="up")
    assert set(ups) == {"prometheus", "chingest"}
    for job, samples in ups.items():
        values = {bits_float(b) for b in samples.values()}
        assert len(samples) >= 3 and values == {1.0}, (job, samples)
        # Scrapes every second: consecutive `up` samples are about 1 s apart.
        times = sorted(samples)
        assert all(500 <= b - a <= 1500 for a, b in zip(times, times[1:])), (job, times)
    build = get_json(f"{prometheus['url']}/api/v1/status/buildinfo")
    (info,) = [dict(k) for k in stored if dict(k)["__name__"] == "prometheus_build_info"]
    assert (info["version"], info["revision"], info["goversion"]) == (
        build["version"], build["revision"], build["goVersion"]), (info, build)
    # chingest counts the remote-write requests it answered 204 and
    # Prometheus scraped that counter: it only grows, and is positive.
    (writes,) = series(__name__="chingest_http_requests_total", endpoint="/api/v1/write",
                       status="204").values()
    counts = [bits_float(writes[ms]) for ms in sorted(writes)]
    assert counts[-1] > 0 and counts == sorted(counts), counts

    # Metadata: one point per family with the type, help and unit that
    # /api/v1/metadata reports.
    def metadata_matches():
        reported_meta = get_json(f"{prometheus['url']}/api/v1/metadata")
        if not table_exists(server, "prometheus_metadata"):
            return "no prometheus_metadata yet"
        rows = query(server, f"SELECT metric, type, help, unit FROM {PROM_DB}.prometheus_metadata")
        stored_meta = {}
        for r in rows:
            assert r["metric"] not in stored_meta, f"two metadata points for {r['metric']}: {rows}"
            stored_meta[r["metric"]] = {"type": r["type"], "help": r["help"], "unit": r["unit"]}
        missing = sorted(reported_meta.keys() - stored_meta.keys())
        wrong = {m: (stored_meta[m], entries) for m, entries in reported_meta.items()
                 if m in stored_meta and stored_meta[m] not in entries}
        if missing or wrong:
            return f"missing {missing[:20]}, differing {dict(list(wrong.items())[:10])}"
        assert len(reported_meta) > 100, reported_meta
        assert {e["type"] for e in stored_meta.values()} >= {"counter", "gauge", "histogram"}
        return None
    eventually(metadata_matches, 20, "prometheus_metadata differs from /api/v1/metadata",
               prometheus)
    meta = {r["metric"]: r["type"] for r in query(
        server, f"SELECT metric, type FROM {PROM_DB}.prometheus_metadata "
                "WHERE metric IN ('chingest_http_requests_total', 'prometheus_build_info', "
                "'prometheus_http_request_duration_seconds')")}
    assert meta == {"chingest_http_requests_total": "counter", "prometheus_build_info": "gauge",
                    "prometheus_http_request_duration_seconds": "histogram"}, meta

    # Prometheus itself counts no failed or dropped sends (retries, after a
    # 429 or 503, would be allowed).
    for counter in ("samples_failed_total", "samples_dropped_total", "metadata_failed_total"):
        result = get_json(f"{prometheus['url']}/api/v1/query",
                          query=f"sum(prometheus_remote_storage_{counter})")["result"]
        assert result and float(result[0]["value"][1]) == 0, (
            counter, result, remote_write_errors(prometheus["log"]))
    assert remote_write_errors(prometheus["log"]) == ""
    print(f"compared {len(stored)} series, {sum(map(len, stored.values()))} samples "
          f"in {time.time() - started:.1f}s")
