"""Exports one of each OpenTelemetry instrument with the OTLP exporter of
OpenTelemetry's Python SDK: run by test_otlp.py in the .venv-otel
virtualenv.

Usage: otlp_sender.py grpc|http <endpoint> <token> <database>

Instruments: a counter (cumulative sum, monotonic), an up-down counter
(cumulative sum, not monotonic), a histogram with explicit buckets exported
with delta temporality, a histogram aggregated as an exponential histogram,
a synchronous gauge and an observable gauge.
"""

import logging
import sys

from opentelemetry.sdk.metrics import (
    Counter, Histogram, MeterProvider, ObservableGauge, UpDownCounter,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality, PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import (
    ExplicitBucketHistogramAggregation, ExponentialBucketHistogramAggregation, View,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.metrics import Observation

# The SDK logs a failed export and carries on; a sender whose export failed
# must say so, or the test sees only missing rows.
failures = []


class Failures(logging.Handler):
    def emit(self, record):
        failures.append(self.format(record))


logging.getLogger("opentelemetry").addHandler(Failures(level=logging.WARNING))

transport, endpoint, token, database = sys.argv[1:5]
# The export's own timeout, and the shutdown's that waits for it (the
# SDK's 10 s would cut off a first write that creates a database and its
# tables on a busy machine, and exit as if it had been sent).
TIMEOUT_S = 50
headers = {"authorization": f"Bearer {token}", "x-chingest-database": database}
temporality = {Histogram: AggregationTemporality.DELTA}
if transport == "grpc":
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
    options = {"insecure": True}
else:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    options = {}


class Answered(OTLPMetricExporter):
    """The exporter, remembering each export's answer: a reader shut down
    before the export answered says nothing at all."""

    results = []

    def export(self, *args, **kwargs):
        result = super().export(*args, **kwargs)
        Answered.results.append(result)
        return result


exporter = Answered(endpoint=endpoint, headers=headers, preferred_temporality=temporality,
                    timeout=TIMEOUT_S, **options)

# Exported once, at shutdown (a flush before it would export the
# cumulative points twice).
reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3_600_000)
views = [
    View(instrument_name="latency", aggregation=ExplicitBucketHistogramAggregation([0.1, 1.0])),
    View(instrument_name="payload", aggregation=ExponentialBucketHistogramAggregation(max_size=20)),
]
resource = Resource.create({"service.name": f"py-{transport}", "deployment": "ci"})
provider = MeterProvider(metric_readers=[reader], resource=resource, views=views)
meter = provider.get_meter("otlp-test", "0.1")

requests = meter.create_counter("requests", unit="1", description="Requests served")
requests.add(5, {"route": "/a"})
requests.add(2, {"route": "/b"})
requests.add(1, {"route": "/a"})
meter.create_up_down_counter("queue_depth").add(-3, {"queue": "main"})
latency = meter.create_histogram("latency", unit="s")
for value in (0.05, 0.5, 0.7, 3.0):
    latency.record(value, {"route": "/a"})
payload = meter.create_histogram("payload", unit="By")
for value in (1.0, 2.0, 4.0):
    payload.record(value)
meter.create_gauge("temperature", unit="Cel").set(21.5, {"room": "lab"})
meter.create_observable_gauge(
    "open_files", callbacks=[lambda options: [Observation(12, {"pid": "1"})]])

provider.shutdown(timeout_millis=TIMEOUT_S * 1000 + 5_000)
if failures:
    sys.exit("export failed: " + "\n".join(failures))
if [r.name for r in Answered.results] != ["SUCCESS"]:
    sys.exit(f"the export did not succeed: {Answered.results}")
