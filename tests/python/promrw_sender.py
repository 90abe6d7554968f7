"""Exports OpenTelemetry metrics with the Prometheus remote-write exporter:
run by test_prometheus.py in the .venv-otel virtualenv.

Usage: promrw_sender.py <remote write URL> <token>
"""

import sys

from opentelemetry.exporter.prometheus_remote_write import PrometheusRemoteWriteMetricsExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

url, token = sys.argv[1], sys.argv[2]
exporter = PrometheusRemoteWriteMetricsExporter(
    endpoint=url, headers={"Authorization": f"Token {token}"})
# Exported once, when flushed below.
reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
provider = MeterProvider(metric_readers=[reader])
meter = provider.get_meter("promrw-test")
requests = meter.create_counter("requests", description="Requests served")
requests.add(5, {"route": "/a"})
requests.add(2, {"route": "/b"})
queue = meter.create_up_down_counter("queue_depth")
queue.add(7, {"queue": "main"})
if not reader.force_flush(timeout_millis=10_000):
    sys.exit("the export did not finish")
provider.shutdown()
