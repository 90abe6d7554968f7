"""The ClickHouse HTTP interface read by ClickHouse's own clients, unchanged:
clickhouse-connect (Python) and @clickhouse/client (Node, tests/node). Every
answer is compared with what `/sql` returns for the same statement.
"""

import base64
import gzip
import io
import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import clickhouse_connect
import pyarrow as pa
import pytest
from clickhouse_connect import common as ch_common
from clickhouse_connect.driver.exceptions import DatabaseError, ProgrammingError

from conftest import ROOT, TOKEN, sql

DB = "py_ch"
QUERY = f"SELECT host, usage, count FROM {DB}.cpu ORDER BY host"


@pytest.fixture(scope="module")
def ch(server):
    """The server with rows in DB, written through /write."""
    lines = b"cpu,host=a usage=1.5,count=3i 1000000000\ncpu,host=b usage=2.25,count=4i 2000000000\n"
    write = urllib.request.Request(
        f"{server['url']}/write?db={DB}", data=lines,
        headers={"Authorization": f"Token {TOKEN}"}, method="POST")
    with urllib.request.urlopen(write, timeout=10) as r:
        assert r.status == 204
    return server


def client(server, **kwargs):
    kwargs.setdefault("password", TOKEN)
    return clickhouse_connect.get_client(
        host="127.0.0.1", port=server["clickhouse_port"], username="default", **kwargs)


def raw(server, params=None, body=None, headers=None):
    """(status, headers, body) of one request to the ClickHouse interface."""
    url = f"{server['clickhouse']}/?{urllib.parse.urlencode(params or {})}"
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def auth(token=TOKEN):
    return {"Authorization": "Basic " + base64.b64encode(f"default:{token}".encode()).decode()}


def sql_rows(server, query=QUERY):
    return [tuple(row.values()) for row in sql(server, query)]


def test_connect_probes_and_query_match_sql(ch):
    c = client(ch)
    # The connect-time probes: version and timezone, then system.settings.
    assert c.server_version == sql(ch, "SELECT version() AS v")[0]["v"]
    assert c.server_settings["readonly"].value == "1"
    assert c.query(QUERY).result_rows == sql_rows(ch)
    assert c.command("SELECT 1") == 1


def test_query_df_and_query_arrow_match_sql(ch):
    c = client(ch)
    frame = c.query_df(QUERY)
    assert list(frame.columns) == ["host", "usage", "count"]
    assert [tuple(r) for r in frame.itertuples(index=False)] == sql_rows(ch)
    table = c.query_arrow(QUERY)
    assert table.column_names == ["host", "usage", "count"]
    assert [tuple(r.values()) for r in table.to_pylist()] == sql_rows(ch)


def test_the_current_database_comes_from_the_client_or_a_header(ch):
    c = client(ch, database=DB)
    assert c.query("SELECT host, usage, count FROM cpu ORDER BY host").result_rows == sql_rows(ch)
    status, _, body = raw(ch, {"query": "SELECT currentDatabase(), count() FROM cpu"},
                          headers=auth() | {"X-ClickHouse-Database": DB})
    assert (status, body) == (200, f"{DB}\t2\n".encode())
    # A connection's database does not outlive its statement.
    assert client(ch).command("SELECT currentDatabase()") == "default"
    status, headers, body = raw(ch, {"query": "SELECT 1", "database": "py_ch_none"}, headers=auth())
    assert status == 404 and headers["X-ClickHouse-Exception-Code"] == "81", body


def test_wrong_or_missing_credentials_are_clickhouse_s_516(ch):
    with pytest.raises(DatabaseError) as err:
        client(ch, password="not-a-token")
    assert "code: 516" in str(err.value)
    for headers, params in [({}, {}), (auth("wrong"), {}), ({"X-ClickHouse-Key": "wrong"}, {}),
                            ({}, {"user": "default", "password": "wrong"})]:
        status, h, body = raw(ch, {"query": "SELECT 1"} | params, headers=headers)
        assert status == 403 and h["X-ClickHouse-Exception-Code"] == "516", body
        assert body.startswith(b"Code: 516. DB::Exception: default: Authentication failed"), body
    # Every way of giving the token works, one at a time.
    for headers, params in [(auth(), {}), ({"X-ClickHouse-User": "u", "X-ClickHouse-Key": TOKEN}, {}),
                            ({}, {"user": "u", "password": TOKEN}),
                            ({"Authorization": f"Bearer {TOKEN}"}, {})]:
        assert raw(ch, {"query": "SELECT 1"} | params, headers=headers)[::2] == (200, b"1\n")
    status, h, _ = raw(ch, {"query": "SELECT 1", "password": TOKEN}, headers=auth())
    assert (status, h["X-ClickHouse-Exception-Code"]) == (403, "516")


def test_writes_and_ddl_are_refused(ch):
    c = client(ch)
    for statement in [f"DROP TABLE {DB}.cpu", f"INSERT INTO {DB}.cpu (host) VALUES ('x')",
                      "CREATE DATABASE py_ch_new", f"SELECT * FROM {DB}.cpu; SELECT 1"]:
        with pytest.raises(DatabaseError) as err:
            c.command(statement)
        assert "code: 164" in str(err.value), statement
    assert c.query(QUERY).result_rows == sql_rows(ch)
    status, h, body = raw(ch, {"query": "SELECT * FROM system.disks"}, headers=auth())
    assert status == 403 and h["X-ClickHouse-Exception-Code"] == "164", body


def test_settings_that_would_change_are_refused(ch):
    c = client(ch)
    # The client itself reads system.settings: every setting is read-only.
    with pytest.raises(ProgrammingError):
        c.query("SELECT 1", settings={"max_threads": 64})
    previous = ch_common.get_setting("invalid_setting_action")
    ch_common.set_setting("invalid_setting_action", "send")
    try:
        for name, value in [("max_threads", 64), ("max_execution_time", 3600),
                            ("readonly", 0), ("output_format_json_quote_64bit_integers", 1)]:
            with pytest.raises(DatabaseError) as err:
                c.query("SELECT 1", settings={name: value})
            assert "code: 164" in str(err.value), name
            assert f"Cannot modify '{name}' setting in readonly mode" in str(err.value)
    finally:
        ch_common.set_setting("invalid_setting_action", previous)
    # Unchanged values pass, as the engine lets them; unknown names do not.
    status, _, body = raw(ch, {"query": "SELECT 1", "readonly": "1",
                               "output_format_json_quote_64bit_integers": "0",
                               "session_id": "s1", "wait_end_of_query": "1",
                               "send_progress_in_http_headers": "1"}, headers=auth())
    assert (status, body) == (200, b"1\n")
    status, h, body = raw(ch, {"query": "SELECT 1", "no_such_setting": "1"}, headers=auth())
    assert (status, h["X-ClickHouse-Exception-Code"]) == (400, "115"), body
    assert body.startswith(b"Code: 115. DB::Exception: Unknown setting 'no_such_setting'")


def test_compression_both_ways(ch):
    c = client(ch, compress="gzip")
    assert c.query(QUERY).result_rows == sql_rows(ch)
    query = "SELECT number FROM numbers(1000)"
    plain = b"".join(f"{n}\n".encode() for n in range(1000))
    for encoding, decode in [("gzip", gzip.decompress), ("deflate", None), ("zstd", None), ("br", None)]:
        status, h, body = raw(ch, {"query": query, "enable_http_compression": "1"},
                              headers=auth() | {"Accept-Encoding": encoding})
        assert status == 200 and h["Content-Encoding"] == encoding
        assert len(body) < len(plain)
        if decode:
            assert decode(body) == plain
    status, h, body = raw(ch, {"query": query, "enable_http_compression": "0"},
                          headers=auth() | {"Accept-Encoding": "gzip"})
    assert (status, h["Content-Encoding"], body) == (200, None, plain)
    status, _, body = raw(ch, {}, body=gzip.compress(QUERY.encode()),
                          headers=auth() | {"Content-Encoding": "gzip"})
    assert status == 200
    assert [tuple(line.split("\t")) for line in body.decode().splitlines()] == \
        [(h, str(u), str(n)) for h, u, n in sql_rows(ch)]


def test_query_parameter_and_body_and_formats(ch):
    # The parameter, a line feed, then the body.
    status, h, body = raw(ch, {"query": "SELECT host, usage, count", "default_format": "JSONEachRow"},
                          body=f"FROM {DB}.cpu ORDER BY host".encode(), headers=auth())
    assert status == 200 and h["X-ClickHouse-Format"] == "JSONEachRow"
    assert [json.loads(line) for line in body.splitlines()] == sql(ch, QUERY)
    status, h, body = raw(ch, {"query": QUERY + " FORMAT ArrowStream"}, headers=auth())
    assert h["X-ClickHouse-Format"] == "ArrowStream"
    rows = pa.ipc.open_stream(io.BytesIO(body)).read_all().to_pylist()
    assert [tuple(r.values()) for r in rows] == sql_rows(ch)
    status, h, body = raw(ch, {"query": "SELECT 1"}, headers=auth() | {"X-ClickHouse-Format": "JSONEachRow"})
    assert (status, body) == (200, b'{"1":1}\n')


def test_query_ids_summary_and_server_headers(ch):
    c = client(ch)
    assert c.query("SELECT 1", settings={"query_id": "py-query-7"}).query_id == "py-query-7"
    status, h, _ = raw(ch, {"query": "SELECT 1", "query_id": "raw-1"}, headers=auth())
    assert (status, h["X-ClickHouse-Query-Id"]) == (200, "raw-1")
    status, h, body = raw(ch, {"query": "SELECT 1"}, headers=auth())
    assert len(h["X-ClickHouse-Query-Id"]) == 36
    assert h["X-ClickHouse-Timezone"] == "UTC" and h["X-ClickHouse-Server-Display-Name"]
    summary = json.loads(h["X-ClickHouse-Summary"])
    assert summary["result_bytes"] == str(len(body)) and int(summary["elapsed_ns"]) > 0
    assert all(isinstance(v, str) for v in summary.values())


def test_ping_and_ok(ch):
    for path in ["/ping", "/"]:
        with urllib.request.urlopen(ch["clickhouse"] + path, timeout=5) as r:
            assert (r.status, r.read()) == (200, b"Ok.\n")


def test_hostile_requests_are_bounded(ch):
    # A statement past the engine's query size limit is refused unread.
    status, h, body = raw(ch, {}, body=b"SELECT 1 " + b" " * (300 << 10), headers=auth())
    assert (status, h["X-ClickHouse-Exception-Code"]) == (413, "393"), body
    status, h, _ = raw(ch, {}, body=b"SELECT 1", headers=auth() | {"X-Big": "x" * (1 << 20)})
    assert status == 431
    status, h, body = raw(ch, {}, body=b"", headers=auth())
    assert (status, h["X-ClickHouse-Exception-Code"]) == (400, "36"), body
    status, h, body = raw(ch, {"param_x": "1", "query": "SELECT {x:UInt8}"}, headers=auth())
    assert (status, h["X-ClickHouse-Exception-Code"]) == (501, "48"), body
    # The server still answers.
    assert raw(ch, {"query": "SELECT 1"}, headers=auth())[::2] == (200, b"1\n")


def test_node_client(ch):
    node_dir = ROOT / "tests" / "node"
    assert (node_dir / "node_modules" / "@clickhouse" / "client").exists(), "run make test-setup"
    query = "SELECT host, usage, count FROM cpu ORDER BY host"
    run = subprocess.run(
        ["node", str(node_dir / "clickhouse_client.mjs"), ch["clickhouse"], TOKEN, DB, query],
        capture_output=True, text=True, timeout=60, cwd=node_dir)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["ping"] is True
    assert out["rows"] == sql(ch, QUERY) == out["compressed"]
    assert out["query_id"] == "node-query-1"
    assert out["version"] == [{"v": sql(ch, "SELECT version() AS v")[0]["v"]}]
    assert (out["wrong_password"]["code"], out["wrong_password"]["type"]) == ("516", "AUTHENTICATION_FAILED")
    assert (out["ddl"]["code"], out["ddl"]["type"]) == ("164", "READONLY")


def test_requests_count_apart_in_metrics(ch):
    assert raw(ch, {"query": "SELECT 1"}, headers=auth())[0] == 200
    with urllib.request.urlopen(f"{ch['url']}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert 'chingest_http_requests_total{endpoint="clickhouse /",status="200"}' in text
