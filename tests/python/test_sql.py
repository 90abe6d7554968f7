"""`/sql` answers read by the formats' own readers: zero-row results keep
their header (JSON's meta, CSV/TSV column names, the Parquet and Arrow
schema), and non-empty ones parse the same way.
"""

import csv
import io
import json
import urllib.parse
import urllib.request

import pyarrow as pa
import pyarrow.parquet as pq

from conftest import TOKEN, sql


def fetch(server, query, fmt):
    params = urllib.parse.urlencode({"query": query, "format": fmt})
    request = urllib.request.Request(
        f"{server['url']}/sql?{params}", headers={"Authorization": f"Token {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as r:
        assert r.status == 200
        return r.read()


def test_zero_and_some_rows_in_every_format(server):
    sql(server, "SELECT 1")  # the server is up
    write = urllib.request.Request(
        f"{server['url']}/write?db=py_sql", data=b"m,host=a v=1i 1\nm,host=b v=2i 2\n",
        headers={"Authorization": f"Token {TOKEN}"}, method="POST")
    with urllib.request.urlopen(write, timeout=10) as r:
        assert r.status == 204
    for where, rows in [("v > 100", 0), ("v >= 1", 2)]:
        query = f"SELECT host, v FROM py_sql.m WHERE {where} ORDER BY v"

        answer = json.loads(fetch(server, query, "JSON"))
        assert [c["name"] for c in answer["meta"]] == ["host", "v"]
        assert answer["rows"] == rows and len(answer["data"]) == rows

        lines = fetch(server, query, "JSONEachRow").decode().splitlines()
        assert [json.loads(line)["v"] for line in lines] == [1, 2][:rows]

        table = list(csv.reader(io.StringIO(fetch(server, query, "CSVWithNames").decode())))
        assert table[0] == ["host", "v"] and len(table) == 1 + rows

        tsv = fetch(server, query, "TSVWithNames").decode().splitlines()
        assert tsv[0].split("\t") == ["host", "v"] and len(tsv) == 1 + rows

        parquet = pq.read_table(io.BytesIO(fetch(server, query, "Parquet")))
        assert parquet.column_names == ["host", "v"] and parquet.num_rows == rows

        arrow = pa.ipc.open_file(fetch(server, query, "Arrow")).read_all()
        assert arrow.column_names == ["host", "v"] and arrow.num_rows == rows

        stream = pa.ipc.open_stream(fetch(server, query, "ArrowStream")).read_all()
        assert stream.column_names == ["host", "v"] and stream.num_rows == rows
