"""Deletes, corrections and duplicate points through the clients people
already have: InfluxDB 2's delete API (`influxdb-client`), InfluxQL's
DELETE, DROP SERIES and DROP MEASUREMENT (`influxdb`), chingest's
`/api/v2/update`, and its SET DUPLICATE POLICY statement.
"""

import json
import urllib.error
import urllib.request

import pytest
from influxdb import InfluxDBClient
from influxdb_client import InfluxDBClient as InfluxDBClient2
from influxdb_client.client.write_api import SYNCHRONOUS

from conftest import TOKEN, sql

# Two hosts, t = 1..6 s (as ns), and a second measurement.
LINES = "\n".join(
    [f"cpu,host={h},dc=eu usage={t}.5,n={t}i {t}000000000" for t in range(1, 7) for h in "ab"]
    + [f"mem,host=a used={t}i {t}000000000" for t in range(1, 7)]
)


def write(server, db):
    request = urllib.request.Request(
        f"{server['url']}/write?db={db}", data=LINES.encode(), method="POST",
        headers={"Authorization": f"Token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.status == 204


def points(server, db, measurement="cpu"):
    rows = sql(server, f"SELECT host, toUnixTimestamp(time) AS t, * EXCEPT (host, time) "
                       f"FROM {db}.{measurement} ORDER BY host, t")
    return [tuple(row.values()) for row in rows]


def post(server, path, body):
    request = urllib.request.Request(
        f"{server['url']}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Token {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_v2_client_deletes_by_measurement_tags_and_time(server):
    write(server, "py_del2")
    with InfluxDBClient2(url=server["url"], token=TOKEN, org="ignored") as client:
        # start and stop are inclusive: t = 2, 3 and 4 of host a go.
        client.delete_api().delete("1970-01-01T00:00:02Z", "1970-01-01T00:00:04Z",
                                   '_measurement="cpu" AND host="a"', bucket="py_del2",
                                   org="ignored")
    assert [(h, t) for h, t, *_ in points(server, "py_del2")] == (
        [("a", 1), ("a", 5), ("a", 6)] + [("b", t) for t in range(1, 7)])
    assert len(points(server, "py_del2", "mem")) == 6


def test_delete_errors_name_the_problem(server):
    write(server, "py_del_err")
    path = "/api/v2/delete?bucket=py_del_err"
    cases = [
        ({"start": "1970-01-01T00:00:00Z", "predicate": "host=\"a\""}, "start and stop"),
        ({"start": "1970-01-01T00:00:00Z", "stop": "tomorrow"}, "invalid time"),
        ({"start": "1970-01-01T00:00:00Z", "stop": "1970-01-02T00:00:00Z",
          "predicate": 'host="a" OR host="b"'}, "OR"),
        ({"start": "1970-01-01T00:00:00Z", "stop": "1970-01-02T00:00:00Z",
          "predicate": '_field="usage"'}, "_field"),
    ]
    for body, says in cases:
        status, answer = post(server, path, body)
        assert status == 400 and says in answer["message"], (body, answer)
        assert answer["code"] == "invalid"
    status, answer = post(server, "/api/v2/delete?bucket=nope",
                          {"start": "1970-01-01T00:00:00Z", "stop": "1970-01-02T00:00:00Z"})
    assert status == 404, answer
    # Nothing was deleted by the refused requests.
    assert len(points(server, "py_del_err")) == 12


def test_influxql_delete_drop_series_and_drop_measurement(server):
    write(server, "py_del1")
    client = InfluxDBClient(host="127.0.0.1", port=server["port"], username="u", password=TOKEN,
                            database="py_del1")
    client.query("DELETE FROM cpu WHERE host = 'b' AND time >= 5s")
    assert [(h, t) for h, t, *_ in points(server, "py_del1")] == (
        [("a", t) for t in range(1, 7)] + [("b", t) for t in range(1, 5)])
    # The client's own helpers send DROP SERIES and DROP MEASUREMENT.
    client.delete_series(measurement="cpu", tags={"host": "a"})
    assert [(h, t) for h, t, *_ in points(server, "py_del1")] == [("b", t) for t in range(1, 5)]
    assert sql(server, "SELECT tags['host'] AS host FROM py_del1._series FINAL "
                       "WHERE measurement = 'cpu'") == [{"host": "b"}]
    client.drop_measurement("mem")
    assert points(server, "py_del1", "mem") == []
    from influxdb.exceptions import InfluxDBClientError
    with pytest.raises(InfluxDBClientError) as raised:
        client.query("DELETE FROM cpu WHERE host > 'a'")
    assert raised.value.code == 400 and "tags compare" in str(raised.value)
    client.close()


def test_update_corrects_values_at_once(server):
    write(server, "py_upd")
    path = "/api/v2/update?bucket=py_upd"
    status, _ = post(server, path, {
        "start": "1970-01-01T00:00:03Z", "predicate": '_measurement="cpu" AND host="a"',
        "set": {"usage": 99, "n": -1}})
    assert status == 204
    rows = points(server, "py_upd")
    assert [(t, usage, n) for h, t, _dc, usage, n in rows if h == "a"] == (
        [(1, 1.5, 1), (2, 2.5, 2)] + [(t, 99.0, -1) for t in range(3, 7)])
    assert all(usage == t + 0.5 for h, t, _dc, usage, _ in rows if h == "b")
    for body, says in [
        ({"predicate": 'host="a"', "set": {"usage": 1}}, "_measurement"),
        ({"predicate": '_measurement="cpu"', "set": {"n": 1.5}}, "does not fit"),
        ({"predicate": '_measurement="cpu"', "set": {"nope": 1}}, "no field"),
        ({"predicate": '_measurement="cpu"'}, "set"),
        ({"predicate": '_measurement="cpu"', "set": {"usage": [1]}}, "cannot be a field value"),
    ]:
        status, answer = post(server, path, body)
        assert status == 400 and says in answer["message"], (body, answer)


def test_duplicate_policy_last_keeps_one_point_with_the_newest_fields(server):
    from influxdb.exceptions import InfluxDBClientError
    client = InfluxDBClient(host="127.0.0.1", port=server["port"], username="u", password=TOKEN,
                            database="py_dup")
    client.create_database("py_dup")
    client.query('SET DUPLICATE POLICY last ON "py_dup"', method="POST")
    shown = list(client.query("SHOW DUPLICATE POLICIES ON py_dup").get_points())
    assert shown == [{"measurement": "", "policy": "last"}]
    # The same point three times: in one request, then again with one field.
    assert client.write_points(["m,h=a x=1i,y=1i 1", "m,h=a x=2i 1"], protocol="line")
    assert client.write_points(["m,h=a y=5i 1"], protocol="line")
    assert sql(server, "SELECT h, x, y FROM py_dup.m") == [{"h": "a", "x": 2, "y": 5}]
    # Its table exists now: the policy can no longer change.
    with pytest.raises(InfluxDBClientError) as raised:
        client.query('SET DUPLICATE POLICY append ON "py_dup"', method="POST")
    assert raised.value.code == 409 and "another duplicate policy" in str(raised.value)
    # Another measurement can still get its own before its first write.
    client.query('SET DUPLICATE POLICY append ON "py_dup" MEASUREMENT "n"', method="POST")
    assert client.write_points(["n v=1i 1", "n v=2i 1"], protocol="line")
    assert sql(server, "SELECT v FROM py_dup.`n.autogen` ORDER BY v") == [{"v": 1}, {"v": 2}]
    client.close()
