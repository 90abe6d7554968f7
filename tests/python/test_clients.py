"""InfluxDB's own Python clients write to a real chingest server, unchanged.

The server comes from conftest.py; rows are checked through /sql. Run with
`make test`, or `python3 -m pytest tests/python`.
"""

import json

import pytest
from influxdb import InfluxDBClient
from influxdb_client import InfluxDBClient as InfluxDBClient2, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS

from conftest import TOKEN, sql


def test_v2_client_writes_points_records_and_line_protocol(server):
    with InfluxDBClient2(url=server["url"], token=TOKEN, org="ignored") as client:
        write = client.write_api(write_options=SYNCHRONOUS)
        write.write(bucket="py_v2", record=[
            Point("cpu").tag("host", "a").tag("region", "eu").field("usage", 0.5)
            .field("count", 3).field("ok", True).field("note", 'say "hi"')
            .time(1_700_000_000_000_000_000, WritePrecision.NS),
            Point("cpu").tag("host", "b").field("usage", 1.5).time(1_700_000_000, WritePrecision.S),
        ])
        write.write(bucket="py_v2/weekly", record="mem,host=a used=42i 1700000000000", write_precision=WritePrecision.MS)
    rows = sql(server, "SELECT toUnixTimestamp(time) AS t, s.tags['host'] AS host, usage, count, ok, note "
                       "FROM py_v2.`cpu.autogen` AS f JOIN py_v2._series AS s USING series_id ORDER BY host")
    assert rows == [
        {"t": 1700000000, "host": "a", "usage": 0.5, "count": 3, "ok": True, "note": 'say "hi"'},
        {"t": 1700000000, "host": "b", "usage": 1.5, "count": None, "ok": None, "note": None},
    ]
    assert sql(server, "SELECT used FROM py_v2.`mem.weekly`") == [{"used": 42}]


def test_v2_client_sees_partial_writes_as_errors(server):
    from influxdb_client.rest import ApiException
    with InfluxDBClient2(url=server["url"], token=TOKEN, org="ignored") as client:
        write = client.write_api(write_options=SYNCHRONOUS)
        with pytest.raises(ApiException) as raised:
            write.write(bucket="py_partial", record="m v=1i 1\nm v=bad 2\nm v=3i 3")
    assert raised.value.status == 400
    body = json.loads(raised.value.body)
    assert body["code"] == "invalid" and "line 2" in body["message"]
    assert sql(server, "SELECT v FROM py_partial.`m.autogen` ORDER BY time") == [{"v": 1}, {"v": 3}]


def test_v2_client_with_a_wrong_token_is_refused(server):
    from influxdb_client.rest import ApiException
    with InfluxDBClient2(url=server["url"], token="wrong", org="ignored") as client:
        with pytest.raises(ApiException) as raised:
            client.write_api(write_options=SYNCHRONOUS).write(bucket="py_auth", record="m v=1i")
    assert raised.value.status == 401


def test_v1_client_writes_points(server):
    client = InfluxDBClient(host="127.0.0.1", port=server["port"], username="u", password=TOKEN,
                            database="py_v1")
    assert client.ping()
    client.create_database("py_v1")
    assert {"name": "py_v1"} in client.get_list_database()
    assert client.get_list_retention_policies("py_v1")[0]["name"] == "autogen"
    client.create_retention_policy("month", "30d", 1, database="py_v1")
    policies = {p["name"]: p["duration"] for p in client.get_list_retention_policies("py_v1")}
    assert policies == {"autogen": "0s", "month": "720h0m0s"}
    ok = client.write_points([
        {"measurement": "disk", "tags": {"host": "a", "path": "/"},
         "time": 1_700_000_000_000_000_000, "fields": {"free": 10, "pct": 0.25}},
        {"measurement": "disk", "tags": {"host": "a", "path": "/home"},
         "time": 1_700_000_000_000_000_000, "fields": {"free": 20, "pct": 0.5}},
    ], time_precision="n")
    assert ok
    assert client.write_points(["disk,host=b,path=/ free=30i 1700000000"], time_precision="s",
                               protocol="line")
    rows = sql(server, "SELECT s.tags['host'] AS host, s.tags['path'] AS path, free, pct "
                       "FROM py_v1.`disk.autogen` JOIN py_v1._series AS s USING series_id ORDER BY host, path")
    assert rows == [
        {"host": "a", "path": "/", "free": 10, "pct": 0.25},
        {"host": "a", "path": "/home", "free": 20, "pct": 0.5},
        {"host": "b", "path": "/", "free": 30, "pct": None},
    ]
    client.close()


def test_v1_client_partial_write_raises(server):
    from influxdb.exceptions import InfluxDBClientError
    client = InfluxDBClient(host="127.0.0.1", port=server["port"], username="u", password=TOKEN,
                            database="py_v1_partial")
    with pytest.raises(InfluxDBClientError) as raised:
        client.write_points(["m v=1i 1", "m v=x 2"], protocol="line")
    assert raised.value.code == 400
    assert "partial write" in str(raised.value)
    assert sql(server, "SELECT v FROM py_v1_partial.`m.autogen`") == [{"v": 1}]
    client.close()
