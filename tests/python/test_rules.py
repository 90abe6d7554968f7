"""Recording and alerting rules beside a live Prometheus 2.42 (Debian's
package): Prometheus scrapes an exporter (this test's, whose values it
sets), evaluates a rule file, and remote-writes the scraped samples to
chingest, which evaluates the same rule file over them (`[rules]`). The
recorded series and the alerts of both are compared once both settled,
and again after the exporter's values change (an alert resolves, another
fires). Prometheus's own recorded series and ALERTS are not remote-written,
so chingest's rules read only the raw samples and their own output.
"""

import http.server
import json
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import pytest

from conftest import BINARY, free_port, start_server, stop_server, wait_until_up, answers

PROMETHEUS = pathlib.Path("/usr/bin/prometheus")
DB = "rules_live"
RULES = """groups:
- name: rooms
  rules:
  - record: room:temp:max
    expr: max by (room) (temp)
  - record: temp:avg
    expr: avg(temp)
    labels:
      site: lab
  - record: room:temp:doubled
    expr: room:temp:max * 2
  - record: rooms:count
    expr: count(temp > 15)
  - alert: Hot
    expr: temp > 40
    labels:
      severity: page
    annotations:
      summary: '{{ $labels.room }} is at {{ $value }} degrees, one of {{ with query "count(temp)" }}{{ . | first | value }}{{ end }} rooms'
  - alert: Warm
    expr: temp > 25
    for: 1h
  - alert: Frozen
    expr: temp < 0
"""


class Exporter:
    """An HTTP server answering /metrics with `values` (room → degrees)."""

    def __init__(self):
        self.values = {"a": 20, "b": 30, "c": 45}
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = "".join(f'temp{{room="{room}"}} {v}\n' for room, v in sorted(exporter.values.items()))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def get(url, path, **params):
    query = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}{path}?{query}", timeout=10) as r:
        answer = json.loads(r.read())
    assert answer["status"] == "success", answer
    return answer["data"]


@pytest.fixture
def both(tmp_path):
    """An exporter; chingest evaluating RULES over database DB; and a
    Prometheus scraping the exporter every second, evaluating RULES every
    second and remote-writing the raw samples to chingest's DB."""
    assert PROMETHEUS.exists(), "run make test-setup (Debian's prometheus)"
    assert BINARY.exists(), f"build the server first: {BINARY}"
    exporter = Exporter()
    (tmp_path / "rules.yml").write_text(RULES)
    config = tmp_path / "chingest.toml"
    config.write_text(f'[promql]\ndefault_database = "{DB}"\n\n'
                      f'[rules]\nfiles = ["rules.yml"]\nevaluation_interval_ms = 1000\ndatabase = "{DB}"\n')
    data_dir = tempfile.mkdtemp(prefix="chingest-rules-")
    proc, where = start_server(f"{data_dir}/data", "--config", str(config))
    port = free_port()
    prometheus_config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(tmp_path / "rules.yml")],
        "scrape_configs": [{"job_name": "rooms",
                            "static_configs": [{"targets": [f"127.0.0.1:{exporter.port}"]}]}],
        "remote_write": [{
            "url": f"{where['url']}/api/v1/write?db={DB}",
            "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms", "max_backoff": "1s"},
            # Prometheus's own results stay with it: chingest computes its own.
            "write_relabel_configs": [{"source_labels": ["__name__"], "regex": ".*:.*|ALERTS.*",
                                       "action": "drop"}],
        }],
    }
    (tmp_path / "prometheus.yml").write_text(json.dumps(prometheus_config))
    log_path = tmp_path / "prometheus.log"
    with open(log_path, "wb") as log:
        prom = subprocess.Popen(
            [str(PROMETHEUS), f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'prom'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT)
    prom_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(prom, answers(f"{prom_url}/-/ready", 200), "prometheus",
                      lambda: "\n" + log_path.read_text())
        yield {"chingest": where["url"], "prometheus": prom_url, "exporter": exporter}
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        stop_server(proc)
        exporter.close()
        shutil.rmtree(data_dir, ignore_errors=True)


RECORDED = ["room:temp:max", "temp:avg", "room:temp:doubled", "rooms:count"]


def recorded(url, name):
    """`name`'s series now: {labels: value}."""
    result = get(url, "/api/v1/query", query=name)["result"]
    return {json.dumps(s["metric"], sort_keys=True): float(s["value"][1]) for s in result}


def alerts(url):
    """The alerts pending and firing: {labels: (state, annotations)}."""
    return {json.dumps(a["labels"], sort_keys=True): (a["state"], a["annotations"])
            for a in get(url, "/api/v1/alerts")["alerts"]}


def rules_state(url):
    """Each rule's (type, health, state) from /api/v1/rules."""
    groups = get(url, "/api/v1/rules")["groups"]
    return {r["name"]: (r["type"], r["health"], r.get("state")) for g in groups for r in g["rules"]}


def seen_by_both(both):
    """Everything compared, from both servers."""
    return {name: (recorded(both["chingest"], name), recorded(both["prometheus"], name))
            for name in RECORDED} | {
        "ALERTS": (recorded(both["chingest"], "ALERTS"), recorded(both["prometheus"], "ALERTS")),
        "/api/v1/alerts": (alerts(both["chingest"]), alerts(both["prometheus"])),
        "/api/v1/rules": (rules_state(both["chingest"]), rules_state(both["prometheus"])),
    }


def until_equal(both, expect, timeout=30):
    """Waits until both servers answer alike and `expect(chingest's)` holds;
    fails with what differs."""
    deadline = time.time() + timeout
    while True:
        seen = seen_by_both(both)
        differ = {k: v for k, v in seen.items() if v[0] != v[1]}
        if not differ and expect({k: v[0] for k, v in seen.items()}):
            return seen
        if time.time() > deadline:
            pytest.fail(f"chingest and Prometheus differ: {json.dumps(differ, indent=1)}")
        time.sleep(0.5)


def test_chingest_and_prometheus_record_and_alert_alike(both):
    first = until_equal(both, lambda s: len(s["room:temp:max"]) == 3 and len(s["/api/v1/alerts"]) == 3)
    ours = {k: v[0] for k, v in first.items()}
    assert sorted(ours["room:temp:doubled"].values()) == [40.0, 60.0, 90.0]
    assert list(ours["temp:avg"].values()) == [pytest.approx(95 / 3)]
    assert json.loads(next(iter(ours["temp:avg"])))["site"] == "lab"
    states = sorted(state for state, _ in ours["/api/v1/alerts"].values())
    assert states == ["firing", "pending", "pending"], ours["/api/v1/alerts"]
    hot = next(v for k, v in ours["/api/v1/alerts"].items() if '"Hot"' in k)
    assert hot[1] == {"summary": "c is at 45 degrees, one of 3 rooms"}
    assert ours["/api/v1/rules"]["Hot"] == ("alerting", "ok", "firing")
    # Room c cools, room a freezes: Hot resolves, Frozen fires, Warm is
    # pending for b alone; the recorded series follow on both.
    both["exporter"].values = {"a": -5, "b": 30, "c": 10}
    until_equal(both, lambda s: any('"Frozen"' in k for k in s["/api/v1/alerts"])
                and not any('"Hot"' in k for k in s["/api/v1/alerts"])
                and sorted(s["room:temp:max"].values()) == [-5.0, 10.0, 30.0])
