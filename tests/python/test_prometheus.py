"""Prometheus remote write from a real sender: OpenTelemetry's Prometheus
remote-write exporter (PyPI), run from its own virtualenv (`make setup`
makes .venv-promrw), writes a counter and a gauge; the samples are read
back through /sql.
"""

import pathlib
import subprocess

from conftest import ROOT, TOKEN, sql

VENV_PYTHON = ROOT / ".venv-promrw" / "bin" / "python"
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
