"""OTLP metrics from OpenTelemetry's Python SDK, exported over OTLP/gRPC and
OTLP/HTTP (the `opentelemetry-exporter-otlp-proto-*` packages, run from
the .venv-otel virtualenv that `make setup` makes), read back through /sql:
values, attributes, temporality and metadata of every instrument kind.
"""

import subprocess

import pytest

from conftest import ROOT, TOKEN, sql

VENV_PYTHON = ROOT / ".venv-otel" / "bin" / "python"
SENDER = ROOT / "tests" / "python" / "otlp_sender.py"


def export(transport, endpoint, database):
    assert VENV_PYTHON.exists(), f"run `make setup` first: {VENV_PYTHON} is missing"
    sent = subprocess.run([str(VENV_PYTHON), str(SENDER), transport, endpoint, TOKEN, database],
                          capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stdout + sent.stderr


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_every_instrument_kind_lands(server, transport):
    db = f"py_otlp_{transport}"
    endpoint = server["grpc"] if transport == "grpc" else f"{server['url']}/v1/metrics"
    export(transport, endpoint, db)
    service = f"py-{transport}"

    sums = sql(server, f"SELECT metric_name, route, queue, value, aggregation_temporality, "
                       f"is_monotonic, `resource.service.name` AS service, `resource.deployment` AS "
                       f"deployment, `scope.name` AS scope, `scope.version` AS version, "
                       f"start_time_unix_nano FROM {db}.otel_metrics_sum ORDER BY metric_name, route")
    assert [(r["metric_name"], r["route"] or r["queue"], r["value"], r["aggregation_temporality"],
             r["is_monotonic"]) for r in sums] == [
        ("queue_depth", "main", -3.0, "cumulative", False),
        ("requests", "/a", 6.0, "cumulative", True),
        ("requests", "/b", 2.0, "cumulative", True),
    ]
    for row in sums:
        assert (row["service"], row["deployment"], row["scope"], row["version"]) == \
            (service, "ci", "otlp-test", "0.1"), row
        assert int(row["start_time_unix_nano"]) > 0, row

    gauges = sql(server, f"SELECT metric_name, room, pid, value FROM {db}.otel_metrics_gauge "
                         f"ORDER BY metric_name")
    assert [(r["metric_name"], r["room"] or r["pid"], r["value"]) for r in gauges] == [
        ("open_files", "1", 12.0), ("temperature", "lab", 21.5)]

    [latency] = sql(server, f"SELECT route, count, sum, min, max, bucket_counts, explicit_bounds, "
                            f"aggregation_temporality FROM {db}.otel_metrics_histogram")
    assert latency["route"] == "/a"
    assert (int(latency["count"]), latency["sum"], latency["min"], latency["max"]) == \
        (4, pytest.approx(4.25), 0.05, 3.0)
    assert [int(c) for c in latency["bucket_counts"]] == [1, 2, 1]
    assert latency["explicit_bounds"] == [0.1, 1.0]
    assert latency["aggregation_temporality"] == "delta"

    [payload] = sql(server, f"SELECT count, sum, scale, zero_count, positive_offset, "
                            f"positive_bucket_counts, aggregation_temporality "
                            f"FROM {db}.otel_metrics_exponential_histogram")
    assert (int(payload["count"]), payload["sum"], int(payload["zero_count"])) == (3, 7.0, 0)
    assert sum(int(c) for c in payload["positive_bucket_counts"]) == 3
    # The sender asks for delta histograms, exponential ones included.
    assert payload["aggregation_temporality"] == "delta"
    # 1, 2 and 4 fall in three distinct buckets of the chosen scale.
    assert len([c for c in payload["positive_bucket_counts"] if int(c) > 0]) == 3

    metadata = sql(server, f"SELECT metric_name, type, unit, description "
                           f"FROM {db}.otel_metrics_metadata ORDER BY metric_name")
    assert [(r["metric_name"], r["type"], r["unit"]) for r in metadata] == [
        ("latency", "histogram", "s"),
        ("open_files", "gauge", ""),
        ("payload", "exponential_histogram", "By"),
        ("queue_depth", "sum", ""),
        ("requests", "sum", "1"),
        ("temperature", "gauge", "Cel"),
    ]
    assert metadata[4]["description"] == "Requests served"
