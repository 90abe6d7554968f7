"""A client from another ecosystem on chingest's gRPC API: stubs generated
by grpcio-tools from the repository's proto/ at test time, Arrow IPC
streams written by pyarrow. Rows are checked through /sql.
"""

import pathlib
import sys
import tempfile

import grpc
import pyarrow as pa
import pytest
from grpc_tools import protoc

from conftest import ROOT, TOKEN, sql

AUTH = (("authorization", f"Token {TOKEN}"),)


@pytest.fixture(scope="module")
def pb():
    """The generated modules: (messages, stubs)."""
    out = tempfile.mkdtemp(prefix="chingest-proto-")
    proto = ROOT / "proto"
    status = protoc.main([
        "protoc", f"-I{proto}", f"-I{pathlib.Path(protoc.__file__).parent / '_proto'}",
        f"--python_out={out}", f"--grpc_python_out={out}", "chingest/v1/ingest.proto",
    ])
    assert status == 0, "protoc failed"
    sys.path.insert(0, out)
    from chingest.v1 import ingest_pb2, ingest_pb2_grpc
    return ingest_pb2, ingest_pb2_grpc


@pytest.fixture
def stub(server, pb):
    with grpc.insecure_channel(server["grpc"], compression=grpc.Compression.Gzip) as channel:
        yield pb[1].IngestStub(channel)


def test_points_of_every_type_and_a_partial_write(server, pb, stub):
    m = pb[0]
    points = [
        m.Point(measurement="weather", tags={"city": "Oslo", "station": "7"},
                fields={"temp": m.FieldValue(float=-3.5), "rh": m.FieldValue(integer=81),
                        "gusts": m.FieldValue(unsigned=12), "sky": m.FieldValue(string='snow "light"'),
                        "ok": m.FieldValue(boolean=True)},
                timestamp=1_700_000_000),
        m.Point(measurement="weather", tags={"city": "Bergen"},
                fields={"temp": m.FieldValue(float=7.25)}, timestamp=1_700_000_010),
        # The field type conflicts with the column the first point created.
        m.Point(measurement="weather", tags={"city": "Tromsø"},
                fields={"temp": m.FieldValue(string="cold")}, timestamp=1_700_000_020),
        # No fields.
        m.Point(measurement="weather", tags={"city": "Bodø"}, timestamp=1_700_000_030),
    ]
    reply = stub.Write(m.WriteRequest(database="py_grpc", precision=m.PRECISION_SECONDS,
                                      points=m.Points(points=points)), metadata=AUTH)
    assert (reply.accepted, reply.rejected) == (2, 2)
    assert [r.line for r in reply.rejections] == [3, 4]
    assert "temp" in reply.rejections[0].reason
    rows = sql(server, "SELECT city, temp, rh, gusts, sky, ok, toUnixTimestamp(time) AS t "
                       "FROM py_grpc.weather ORDER BY t")
    assert rows == [
        {"city": "Oslo", "temp": -3.5, "rh": 81, "gusts": 12, "sky": 'snow "light"', "ok": True,
         "t": 1_700_000_000},
        {"city": "Bergen", "temp": 7.25, "rh": None, "gusts": None, "sky": None, "ok": None,
         "t": 1_700_000_010},
    ]


def test_line_protocol_reports_the_bad_line(server, pb, stub):
    m = pb[0]
    body = b"cpu,host=a usage=1 1\ncpu,host=b usage=oops 2\ncpu,host=c usage=3 3\n"
    reply = stub.Write(m.WriteRequest(database="py_grpc_lp", retention_policy="autogen",
                                      line_protocol=body), metadata=AUTH)
    assert (reply.accepted, reply.rejected) == (2, 1)
    assert reply.rejections[0].line == 2 and reply.rejections[0].column > 0
    assert sql(server, "SELECT host FROM py_grpc_lp.cpu ORDER BY host") == [
        {"host": "a"}, {"host": "c"}]


def arrow_requests(m, table, target, chunk=1000):
    """The table as an IPC stream, cut into `chunk`-byte messages."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=500)
    data = sink.getvalue().to_pybytes()
    yield m.WriteArrowRequest(target=target, ipc=data[:chunk])
    for start in range(chunk, len(data), chunk):
        yield m.WriteArrowRequest(ipc=data[start:start + chunk])


def test_write_arrow_streams_a_table(server, pb, stub):
    m = pb[0]
    n = 2_000
    table = pa.table({
        "time": pa.array([1_700_000_000_000_000_000 + i * 1_000_000_000 for i in range(n)],
                         type=pa.timestamp("ns", tz="UTC")),
        "host": pa.array([f"host_{i % 10}" for i in range(n)]),
        "region": pa.array(["eu" if i % 2 else "us" for i in range(n)]).dictionary_encode(),
        "usage": pa.array([i / 10 for i in range(n)], type=pa.float64()),
        "count": pa.array(list(range(n)), type=pa.int64()),
    })
    target = m.ArrowTarget(database="py_grpc_arrow", measurement="cpu",
                           tag_columns=["host", "region"])
    reply = stub.WriteArrow(arrow_requests(m, table, target), metadata=AUTH)
    assert (reply.rows, reply.batches) == (n, 4)
    rows = sql(server, "SELECT count() AS n, sum(count) AS total, uniqExact(host) AS hosts, "
                       "uniqExact(region) AS regions FROM py_grpc_arrow.cpu")
    assert rows == [{"n": n, "total": n * (n - 1) // 2, "hosts": 10, "regions": 2}]


def test_write_arrow_names_the_column_it_cannot_take(server, pb, stub):
    m = pb[0]
    target = m.ArrowTarget(database="py_grpc_arrow_bad", measurement="cpu")
    good = pa.table({"time": pa.array([1], type=pa.int64()), "usage": pa.array([1.5])})
    stub.WriteArrow(arrow_requests(m, good, target), metadata=AUTH)
    conflicting = pa.table({"time": pa.array([2], type=pa.int64()), "usage": pa.array(["high"])})
    with pytest.raises(grpc.RpcError) as raised:
        stub.WriteArrow(arrow_requests(m, conflicting, target), metadata=AUTH)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "usage" in raised.value.details()
    no_time = pa.table({"usage": pa.array([1.5])})
    with pytest.raises(grpc.RpcError) as raised:
        stub.WriteArrow(arrow_requests(m, no_time, target), metadata=AUTH)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "time" in raised.value.details()
    assert sql(server, "SELECT count() AS n FROM py_grpc_arrow_bad.cpu") == [{"n": 1}]


def test_a_wrong_token_is_unauthenticated(server, pb, stub):
    m = pb[0]
    request = m.WriteRequest(database="py_grpc", line_protocol=b"m v=1")
    for metadata in [(), (("authorization", "Token wrong"),)]:
        with pytest.raises(grpc.RpcError) as raised:
            stub.Write(request, metadata=metadata)
        assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_reflection_lists_the_services_to_a_generic_client(server):
    """grpcio-reflection's descriptor database speaks reflection v1alpha."""
    from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
        ProtoReflectionDescriptorDatabase,
    )
    with grpc.insecure_channel(server["grpc"]) as channel:
        db = ProtoReflectionDescriptorDatabase(channel)
        services = set(db.get_services())
        assert {"chingest.v1.Ingest", "grpc.health.v1.Health"} <= services
        ingest = db.FindFileContainingSymbol("chingest.v1.Ingest")
        assert ingest.package == "chingest.v1"
        assert [s.name for s in ingest.service] == ["Ingest"]
