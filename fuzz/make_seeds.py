"""Writes the fuzz targets' seed corpora into seeds/<target>/ from the test
suites' real inputs: line protocol bodies of the parity corpus against
InfluxDB, InfluxQL statements of the differential and the planner's golden
files, PromQL queries of the differential against Prometheus, and protocol
messages encoded as their senders encode them.

Run from the repository's root, after `make setup` (for .venv-otel):
    python3 fuzz/make_seeds.py
The seeds are checked in; run this again when the suites' inputs change.
Inputs a run of a target found interesting are kept apart (`corpus/`) and
crashes are checked in under seeds/<target>/regression-*, never rewritten.
"""

import gzip
import hashlib
import io
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "fuzz" / "seeds"
sys.path.insert(0, str(ROOT / "tests" / "python"))


def write(target, inputs):
    folder = SEEDS / target
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("seed-*"):
        old.unlink()
    for data in inputs:
        if isinstance(data, str):
            data = data.encode()
        name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
        (folder / name).write_bytes(data)
    print(f"{target}: {len(list(folder.glob('seed-*')))} seeds")


# Protobuf, written out field by field (what the seeds need of it).
def varint(n):
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, value):
    """A length-delimited field (bytes, string or message)."""
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def double(number, value):
    import struct
    return varint(number << 3 | 1) + struct.pack("<d", value)


def int_field(number, value):
    return varint(number << 3) + varint(value)


def packed(number, values):
    return field(number, b"".join(varint(v) for v in values))


def line_protocol():
    import test_lp_parity
    bodies = [case.values[0] for case in test_lp_parity.CASES]
    return [b for b in bodies if len(b) < 4096]


def influxql():
    import test_influxql
    queries = [case.values[0] for case in test_influxql.STATEMENTS]
    for golden in sorted((ROOT / "crates" / "influxql" / "tests" / "golden").glob("*.txt")):
        queries += [line[6:] for line in golden.read_text().splitlines() if line.startswith("query ")]
    return sorted(set(queries))


def promql():
    corpus = ROOT / "crates" / "server" / "tests" / "promql" / "corpus.txt"
    queries = []
    for line in corpus.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("!"):
            line = line.split("::", 1)[1].strip()
        queries.append(re.sub(r"\$\{(-?\d+)\}", lambda m: str(1700003600 + int(m.group(1))), line))
    return sorted(set(queries))


def sql_gate():
    """The hostile suite's statements, and some that name what the target
    hides (the `secret` database, the canary file)."""
    suite = (ROOT / "crates" / "server" / "tests" / "sandbox.rs").read_text()
    literals = re.findall(r'"((?:[^"\\]|\\.)*)"', suite)
    statements = [s.encode().decode("unicode_escape") for s in literals
                  if re.match(r"\s*(SELECT|WITH|SHOW|DESCRIBE|EXPLAIN|INSERT|CREATE|SET|\()", s, re.I)]
    statements += [
        "SELECT * FROM public.cpu",
        "SELECT host, avg(usage) FROM public.cpu GROUP BY host",
        "SELECT * FROM secret.vault",
        "SELECT * FROM `secret`.`vault.autogen`",
        "SELECT * FROM merge('secret', '.*')",
        "SELECT * FROM file('chingest-fuzz-canary.txt', 'LineAsString')",
        "SELECT * FROM last_values('public', 'cpu')",
        "SELECT * FROM last_values('secret', 'vault')",
        "SELECT name FROM system.tables",
        "SELECT * FROM public.cpu SETTINGS readonly = 0",
    ]
    return sorted(set(statements))


def remote_write_v1():
    def series(name, labels, samples):
        out = field(1, field(1, "__name__") + field(2, name))
        for k, v in labels:
            out += field(1, field(1, k) + field(2, v))
        for value, ts in samples:
            out += field(2, double(1, value) + int_field(2, ts))
        return field(1, out)
    metadata = field(3, int_field(1, 1) + field(2, "http_requests_total") + field(4, "Requests.") + field(5, ""))
    return [
        series("up", [("job", "node")], [(1.0, 1700000000000)]),
        series("http_requests_total", [("code", "200"), ("job", "api")],
               [(1.0, 1700000000000), (2.0, 1700000015000)])
        + series("temperature", [("room", "lab")], [(21.5, 1700000000000)]) + metadata,
        metadata,
        series("stale", [], [(float.fromhex("0x7ff0000000000002"), 1700000000000)]),
    ]


def remote_write_v2():
    symbols = ["", "__name__", "http_requests_total", "job", "api", "code", "200", "Requests."]
    table = b"".join(field(4, s) for s in symbols)

    def series(refs, samples, metadata=b""):
        out = packed(1, refs)
        for value, ts in samples:
            out += field(2, double(1, value) + int_field(2, ts))
        return field(5, out + metadata)
    metadata = field(5, int_field(1, 1) + int_field(3, 7))
    return [
        table + series([1, 2, 3, 4, 5, 6], [(1.0, 1700000000000), (3.0, 1700000015000)], metadata),
        table + series([1, 2], [(5.0, 1700000000000)]) + series([1, 2, 3, 4], [(6.0, 1700000000000)]),
    ]


def grpc_write():
    def point(measurement, tags, fields, ts=None):
        out = field(1, measurement)
        for k, v in tags:
            out += field(2, field(1, k) + field(2, v))
        for k, value in fields:
            out += field(3, field(1, k) + field(2, value))
        if ts is not None:
            out += int_field(4, ts)
        return field(1, out)
    points = (point("cpu", [("host", "a")], [("usage", double(1, 0.5)), ("count", int_field(2, 3))],
                    1700000000000000000)
              + point("cpu", [("host", "b")], [("note", field(4, "hi\nthere")), ("up", int_field(5, 1))])
              + point("mem", [], [("free", int_field(3, 1 << 40))], 1))
    return [
        field(1, "telegraf") + int_field(3, 0) + field(5, points),
        field(1, "telegraf") + field(2, "autogen") + field(4, "cpu,host=a usage=1 1700000000000000000\n"),
    ]


OTLP_SENDER = """
import sys
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as service
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m
from opentelemetry.proto.common.v1 import common_pb2 as c
from google.protobuf import json_format

def attrs(**kv):
    return [c.KeyValue(key=k, value=c.AnyValue(string_value=v)) for k, v in kv.items()]

request = service.ExportMetricsServiceRequest()
rm = request.resource_metrics.add()
rm.resource.attributes.extend(attrs(**{"service.name": "seed"}))
rm.resource.attributes.add(key="list", value=c.AnyValue(array_value=c.ArrayValue(values=[c.AnyValue(int_value=1)])))
sm = rm.scope_metrics.add(scope=c.InstrumentationScope(name="seed", version="1"))
t = 1700000000000000000
g = sm.metrics.add(name="temperature", unit="Cel", description="Heat.")
g.gauge.data_points.add(time_unix_nano=t, as_double=21.5, attributes=attrs(room="lab"))
s = sm.metrics.add(name="requests", unit="1")
s.sum.aggregation_temporality = 2
s.sum.is_monotonic = True
s.sum.data_points.add(time_unix_nano=t, start_time_unix_nano=t - 10, as_int=6, attributes=attrs(route="/a"))
h = sm.metrics.add(name="latency", unit="s")
h.histogram.aggregation_temporality = 1
h.histogram.data_points.add(time_unix_nano=t, count=4, sum=4.25, min=0.05, max=3.0,
                            bucket_counts=[1, 2, 1], explicit_bounds=[0.1, 1.0])
e = sm.metrics.add(name="payload", unit="By")
e.exponential_histogram.aggregation_temporality = 1
e.exponential_histogram.data_points.add(time_unix_nano=t, count=3, sum=7.0, scale=1, zero_count=0,
    positive=m.ExponentialHistogramDataPoint.Buckets(offset=0, bucket_counts=[1, 1, 1]))
q = sm.metrics.add(name="rpc")
q.summary.data_points.add(time_unix_nano=t, count=2, sum=3.0,
    quantile_values=[m.SummaryDataPoint.ValueAtQuantile(quantile=0.5, value=1.0)])
bad = sm.metrics.add(name="no_time")
bad.gauge.data_points.add(as_double=1.0)
binary = request.SerializeToString()
sys.stdout.buffer.write(len(binary).to_bytes(4, "little") + binary)
sys.stdout.buffer.write(json_format.MessageToJson(request).encode())
"""


def otlp():
    venv = ROOT / ".venv-otel" / "bin" / "python"
    out = subprocess.run([str(venv), "-c", OTLP_SENDER], capture_output=True, check=True).stdout
    size = int.from_bytes(out[:4], "little")
    return out[4:4 + size], out[4 + size:]


def arrow_ipc():
    import pyarrow as pa
    batch = pa.record_batch({
        "time": pa.array([1700000000000000000, 1700000001000000000], pa.timestamp("ns")),
        "host": pa.array(["a", "b"]).dictionary_encode(),
        "region": pa.array(["eu", "us"]),
        "usage": pa.array([0.5, 1.5]),
        "count": pa.array([1, 2], pa.int64()),
        "up": pa.array([True, False]),
        "note": pa.array(["x", None]),
        "buckets": pa.array([[1.0, 2.0], []], pa.list_(pa.float64())),
    })
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
        writer.write_batch(batch.slice(1))
    stream = sink.getvalue()
    # One message, and messages of 64 bytes.
    return [b"\x00" + stream, b"\x01" + stream]


def snappy_literal(data):
    """A snappy block of one literal (what a sender's encoder may write)."""
    assert 0 < len(data) <= 60
    return varint(len(data)) + bytes([(len(data) - 1) << 2]) + data


def body_compression():
    body = b"cpu,host=a usage=1 1700000000000000000\n"
    limit = (4096).to_bytes(2, "little")
    return [
        b"\x01" + limit + gzip.compress(body * 3),
        b"\x01" + limit + gzip.compress(body) + gzip.compress(body),
        b"\x00" + limit + snappy_literal(body),
        b"\x00" + (10).to_bytes(2, "little") + snappy_literal(body),
        b"\x02" + limit + body,
        b"\x03" + limit + body,
    ]


def backup_manifest():
    body = ("chingest-backup 1\ncreated_ms 1796000000000\nchingest 0.1.0\nengine 26.7.3\n"
            "database telegraf\nbase /backups/full-1\n"
            "file 5b4c1f0e9a2d7c31 8556 .backup\nfile 0000000000000001 0 data/a b.bin\n")
    return [b"\x01" + body.encode(), b"\x00" + body.encode() + b"end 0\n"]


def clickhouse_params():
    """Query strings and headers as ClickHouse's clients send them: the
    first line the query string, then `name: value` headers."""
    basic = "Basic " + __import__("base64").b64encode(b"default:token").decode()
    return [
        "query=SELECT%201&database=telegraf&default_format=JSONEachRow",
        "query_id=3f1c&database=default&wait_end_of_query=1"
        "&send_progress_in_http_headers=1&http_headers_progress_interval_ms=5000"
        "&date_time_input_format=best_effort&output_format_json_quote_64bit_integers=0\n"
        "X-ClickHouse-User: default\nX-ClickHouse-Key: token",
        "session_id=s1&session_timeout=60&enable_http_compression=1"
        "&max_execution_time=30\nAuthorization: " + basic,
        "database=db&readonly=1&max_result_rows=100&result_overflow_mode=throw"
        "\nAuthorization: Bearer token\nX-ClickHouse-Format: TabSeparated",
        "user=default&password=token&query=SELECT%20*%20FROM%20cpu%20FORMAT%20CSV",
        "compress=1&decompress=0&param_x=1",
        "query=SELECT+%27a%27+FORMAT+JSON%3B&X=1\nX-ClickHouse-Database: telegraf",
    ]


def promql_plan():
    """Choices, not text: bytes that pick each kind of query the target's
    grammar has first (selector, range function, aggregation, operator,
    subquery, function, topk), then the rest at random (a fixed seed)."""
    rng = __import__("random").Random(52)
    return [bytes([kind]) + rng.randbytes(31) for kind in range(7) for _ in range(4)]


def influxql_plan():
    """Choices, as for promql_plan: each kind of statement first (raw
    points, one to three aggregates), the rest at random."""
    rng = __import__("random").Random(53)
    return [bytes([kind]) + rng.randbytes(23) for kind in range(4) for _ in range(6)]


def main():
    write("line_protocol", line_protocol())
    write("influxql", influxql())
    write("promql", promql())
    write("sql_gate", sql_gate())
    write("remote_write_v1", remote_write_v1())
    write("remote_write_v2", remote_write_v2())
    write("grpc_write", grpc_write())
    protobuf, json = otlp()
    write("otlp_protobuf", [protobuf])
    write("otlp_json", [json])
    write("arrow_ipc", arrow_ipc())
    write("body_compression", body_compression())
    write("backup_manifest", backup_manifest())
    write("clickhouse_params", clickhouse_params())
    write("promql_plan", promql_plan())
    write("influxql_plan", influxql_plan())


if __name__ == "__main__":
    main()
