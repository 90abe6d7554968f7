"""InfluxQL parity with InfluxDB 1.6: Debian's `influxd` runs beside chingest,
both get the same dataset (one line-protocol body, `precision=s`, into a fresh
database of the same name), then the same statements on `/query`, and must
answer alike: HTTP status, and the JSON — statements, series and their order,
names, tag sets, columns and their order, every value, the shape of an empty
result (`{"statement_id": 0}`). Chunked answers are compared once their chunks
are joined.

Three relaxations, each in one place:
- floats are equal within a relative 1e-9 (`same`): the engines sum in
  different orders;
- rows of one series with the same time (points of several series merged
  into one, without GROUP BY) may come in any order (`in_time_order`):
  InfluxDB's order among them is that of its merge heap, not a rule;
- error messages (`relaxed_errors`): where InfluxDB answers an error, chingest must
  answer one at the same place with the same status, and both messages must
  name the part the case lists (`names=`), but the wording may differ.

Where chingest differs on purpose, the case is in `DIFFERENCES` with the
reason, and in docs/influxql.md; the test checks that those cases still
differ, and that the documented table names the same differences.

The second half drives both servers with the Python `influxdb` client
(ResultSets, the `get_list_*` helpers, epoch, chunked, several statements,
errors) and checks its answers from chingest against InfluxDB's and against
what `/sql` reads from chingest's tables.
"""

import copy
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import influxdb
import influxdb.exceptions
import msgpack
import pytest

from conftest import ROOT, TOKEN, sql, start_server, stop_server

DOC = ROOT / "docs" / "influxql.md"

# --------------------------------------------------------------------------
# The dataset: one line-protocol body, in seconds. Most points are at fixed
# times on 2023-11-14; `daily` spans the end of US daylight time (2023-11-05);
# `recent` is relative to the time the test starts, in whole minutes, for
# `now() - 1h` conditions. No series has two points at one time.

T0 = 1_699_920_000  # 2023-11-14T00:00:00Z
DAYS0 = 1_698_969_600  # 2023-11-03T00:00:00Z
WEIRD = "weird measurement,x=y"  # a measurement name with a space, a comma, an equals sign
HOSTS = [("host_1", "eu", 0), ("host_2", "eu", 30), ("host_3", "us west", 0)]
# Tag keys and values that need quoting and escaping in line protocol and
# InfluxQL, one of them an InfluxQL keyword.
WEIRD_TAGS = [
    {"tag key": "v a l", "k,comma": "a,b", "k=eq": "x=y", 'quote"d': "it's \"q\"",
     "ключ": "значение", "select": "from", "time_zone": "utc"},
    {"tag key": "other", "k,comma": "c", "k=eq": "z", 'quote"d': "plain",
     "ключ": "ключ", "select": "where", "time_zone": "cst"},
]


def lp_escape(text, chars):
    for char in chars:
        text = text.replace(char, "\\" + char)
    return text


def lp_line(measurement, tags, fields, seconds):
    head = lp_escape(measurement, ", ") + "".join(
        f",{lp_escape(k, ', =')}={lp_escape(v, ', =')}" for k, v in sorted(tags.items()))
    body = ",".join(f"{lp_escape(k, ', =')}={v}" for k, v in fields.items())
    return f"{head} {body} {seconds}"


def dataset(now_s):
    """The bodies written to both servers, each with its precision; `now_s`
    places `recent`."""
    return [("s", seconds_body(now_s)), ("ns", nanoseconds_body())]


def seconds_body(now_s):
    """Most of the dataset, in seconds."""
    lines = []
    # cpu: three series, 30 minutes; host_2 is 30 s late each minute, host_3
    # has a 10-minute gap and the only `temp` values.
    for index, (host, region, offset) in enumerate(HOSTS):
        for k in range(30):
            if host == "host_3" and 10 <= k < 20:
                continue
            fields = {"usage_user": f"{(k * 7 % 13) + index * 0.25 + 0.5}",
                      "usage_system": f"{(k * 3 % 5) * 1.5 + index}",
                      "cores": f"{4 * (index + 1)}i"}
            if host == "host_3":
                fields["temp"] = f"{40 + k % 4 * 0.5}"
            lines.append(lp_line("cpu", {"host": host, "region": region}, fields,
                                 T0 + k * 60 + offset))
    # mem: every field type.
    for index, host in enumerate(["host_1", "host_2"]):
        for k in range(12):
            fields = {"used": f"{1000 + k * 10 * (index + 1)}i",
                      "available_percent": f"{50 - k * 1.25 + index}",
                      "ok": "true" if (k + index) % 3 else "false",
                      "status": f'"{["green", "yellow", "red"][(k + index) % 3]}"'}
            lines.append(lp_line("mem", {"host": host}, fields, T0 + k * 300))
    # net: counters; the third series is reset once.
    for index, (host, interface) in enumerate(
            [("host_1", "eth0"), ("host_1", "wi fi"), ("host_2", "eth0")]):
        total = 1000 * (index + 1)
        for k in range(15):
            total = 100 if (index, k) == (2, 8) else total + 100 + (k * 37 % 11) * 10
            lines.append(lp_line("net", {"host": host, "interface": interface},
                                 {"bytes_recv": f"{total}i", "packets": f"{total / 10}"},
                                 T0 + k * 60))
    for index, tags in enumerate(WEIRD_TAGS):
        for k in range(5):
            lines.append(lp_line(WEIRD, tags, {"value": f"{k * 1.5 + index}",
                                               "n": f"{k + index}i"}, T0 + k * 120))
    # clash: a tag key that is also a field key (in another series).
    lines.append(lp_line("clash", {"k": "v"}, {"f": "1"}, T0))
    lines.append(lp_line("clash", {}, {"k": "2", "f": "3"}, T0 + 60))
    # daily: every 3 hours for 5 days around a daylight-time change.
    for index, site in enumerate(["a", "b"]):
        for k in range(40):
            lines.append(lp_line("daily", {"site": site}, {"v": f"{k + index * 100}i"},
                                 DAYS0 + k * 3 * 3600 + index * 1800))
    # recent: minutes before now, some over an hour ago.
    minute = now_s // 60 * 60
    for index, host in enumerate(["host_1", "host_2"]):
        for minutes in [120, 90, 50, 40, 30, 20, 10]:
            lines.append(lp_line("recent", {"host": host},
                                 {"value": f"{minutes / 10 + index}"}, minute - minutes * 60))
    # text: strings that JSON must escape.
    for k, text in enumerate(["", 'say \\"hi\\"', "back\\\\slash", "tab\tand\nnewline",
                              "日本語 🦀", "</script>"]):
        lines.append(lp_line("text", {}, {"s": f'"{text}"', "k": f"{k}i"}, T0 + k))
    # big: integers past 2^53, which a float cannot hold.
    for k, value in enumerate([9007199254740993, 9223372036854775806, -9223372036854775806]):
        lines.append(lp_line("big", {}, {"v": f"{value}i"}, T0 + k))
    return "\n".join(lines) + "\n"


def nanoseconds_body():
    """Points at times seconds cannot say: fractions of a second, and
    before 1970 (where rounding down and truncating part)."""
    base = T0 * 1_000_000_000
    lines = [lp_line("fine", {}, {"v": f"{k}i"}, base + offset) for k, offset in enumerate(
        [1, 100_000_000, 123_456_789, 999_999_999, 1_250_000_000, 500_000_000_000])]
    lines += [lp_line("old", {}, {"v": f"{k}i"}, offset) for k, offset in enumerate(
        [-4_500_000_000_000, -1_800_000_000_000, -1_500_000_000, -1, 0, 600_000_000_000])]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# The statements: (id, q, params, names). `$db` in q is the database's name;
# `params` go beside `db=` (None removes one, `method="POST"` sends q as a
# form field); `names` is given exactly for the cases InfluxDB answers with
# an error: the part both messages must name (see relaxed_errors), and for
# the documented differences where chingest answers one: the part its
# message must name.

W = '"weird measurement,x=y"'
SPAN = "time >= '2023-11-14T00:00:00Z' AND time < '2023-11-14T00:30:00Z'"
DAYS = "time >= '2023-11-03T00:00:00Z' AND time < '2023-11-08T00:00:00Z'"


def case(ident, q, names=None, **params):
    return pytest.param(q, params, names, id=ident)


STATEMENTS = [
    # SHOW MEASUREMENTS
    case("show measurements", "SHOW MEASUREMENTS"),
    case("show measurements with regex", "SHOW MEASUREMENTS WITH MEASUREMENT =~ /^c/"),
    # SHOW TAG KEYS
    case("show tag keys", "SHOW TAG KEYS"),
    case("show tag keys from", "SHOW TAG KEYS FROM cpu"),
    case("show tag keys from quoted", f"SHOW TAG KEYS FROM {W}"),
    case("show tag keys from missing", "SHOW TAG KEYS FROM nosuch"),
    # SHOW TAG VALUES
    case("show tag values key =", "SHOW TAG VALUES FROM cpu WITH KEY = host"),
    case("show tag values every measurement", "SHOW TAG VALUES WITH KEY = host"),
    case("show tag values key in", "SHOW TAG VALUES FROM cpu WITH KEY IN (host, region)"),
    case("show tag values key regex", "SHOW TAG VALUES WITH KEY =~ /^(host|interface)$/"),
    case("show tag values where", "SHOW TAG VALUES FROM cpu WITH KEY = host WHERE region = 'eu'"),
    case("show tag values where regex",
         "SHOW TAG VALUES FROM cpu WITH KEY = host WHERE host =~ /^host_[12]$/"),
    case("show tag values where not regex",
         "SHOW TAG VALUES WITH KEY = host WHERE host !~ /^host_[12]$/"),
    case("show tag values quoted key", f'SHOW TAG VALUES FROM {W} WITH KEY = "tag key"'),
    case("show tag values key with quote", f'SHOW TAG VALUES FROM {W} WITH KEY = "quote\\"d"'),
    case("show tag values unicode key", 'SHOW TAG VALUES WITH KEY = "ключ"'),
    case("show tag values keyword key where quoted",
         f"SHOW TAG VALUES FROM {W} WITH KEY = \"select\" WHERE \"k,comma\" = 'a,b'"),
    case("show tag values key in quoted",
         f'SHOW TAG VALUES FROM {W} WITH KEY IN ("k=eq", "time_zone")'),
    case("show tag values missing key", "SHOW TAG VALUES WITH KEY = nosuch"),
    case("show tag values missing measurement", "SHOW TAG VALUES FROM nosuch WITH KEY = host"),
    case("show tag values missing value",
         "SHOW TAG VALUES FROM cpu WITH KEY = host WHERE region = 'mars'"),
    # SHOW FIELD KEYS
    case("show field keys", "SHOW FIELD KEYS"),
    case("show field keys from", "SHOW FIELD KEYS FROM mem"),
    case("show field keys from quoted", f"SHOW FIELD KEYS FROM {W}"),
    case("show field keys from missing", "SHOW FIELD KEYS FROM nosuch"),
    # SHOW SERIES
    case("show series", "SHOW SERIES"),
    case("show series from", "SHOW SERIES FROM net"),
    case("show series from quoted", f"SHOW SERIES FROM {W}"),
    case("show series where", "SHOW SERIES WHERE host = 'host_1'"),
    case("show series from where space", "SHOW SERIES FROM cpu WHERE region = 'us west'"),
    case("show series where regex or", "SHOW SERIES FROM net WHERE interface =~ /^wi/ OR host = 'host_2'"),
    case("show series from missing", "SHOW SERIES FROM nosuch"),
    case("show series missing value", "SHOW SERIES WHERE host = 'nobody'"),
    # SHOW … CARDINALITY: the bare SERIES and MEASUREMENT forms are one
    # estimate of the database (chingest's is exact); the others, and those
    # with any clause, a count per measurement (and GROUP BY tag set).
    case("show series cardinality", "SHOW SERIES CARDINALITY"),
    case("show series cardinality on", "SHOW SERIES CARDINALITY ON $db", db=None),
    case("show series cardinality on missing database", "SHOW SERIES CARDINALITY ON nosuchdb"),
    case("show series cardinality without database", "SHOW SERIES CARDINALITY", db=None,
         names="database name required"),
    case("show series exact cardinality", "SHOW SERIES EXACT CARDINALITY"),
    case("show series exact cardinality from", "SHOW SERIES EXACT CARDINALITY FROM cpu"),
    case("show series cardinality from", "SHOW SERIES CARDINALITY FROM net, mem"),
    case("show series exact cardinality from regex", "SHOW SERIES EXACT CARDINALITY FROM /^c/"),
    case("show series exact cardinality from regex everything",
         "SHOW SERIES EXACT CARDINALITY FROM /.*/ WHERE site !~ /./"),
    case("show series cardinality where", "SHOW SERIES CARDINALITY WHERE host = 'host_1'"),
    case("show series exact cardinality where or",
         "SHOW SERIES EXACT CARDINALITY WHERE host =~ /1/ OR region = 'eu'"),
    case("show series exact cardinality group by",
         "SHOW SERIES EXACT CARDINALITY FROM cpu GROUP BY region"),
    case("show series exact cardinality group by two",
         "SHOW SERIES EXACT CARDINALITY FROM cpu, mem GROUP BY region, host"),
    case("show series exact cardinality group by star",
         "SHOW SERIES EXACT CARDINALITY FROM cpu, net GROUP BY *"),
    case("show series exact cardinality group by star where",
         "SHOW SERIES EXACT CARDINALITY FROM clash, cpu WHERE host = 'host_1' GROUP BY *"),
    case("show series exact cardinality group by every measurement",
         "SHOW SERIES EXACT CARDINALITY GROUP BY host"),
    case("show series exact cardinality group by missing tag",
         "SHOW SERIES EXACT CARDINALITY FROM big GROUP BY host"),
    case("show series exact cardinality quoted",
         f'SHOW SERIES EXACT CARDINALITY FROM {W} GROUP BY "tag key"'),
    case("show series exact cardinality everything",
         "SHOW SERIES EXACT CARDINALITY ON $db FROM cpu WHERE region = 'eu' GROUP BY host "
         "LIMIT 1 OFFSET 0", db=None),
    case("show series exact cardinality limit", "SHOW SERIES EXACT CARDINALITY FROM /^c/ LIMIT 1"),
    case("show series exact cardinality offset", "SHOW SERIES EXACT CARDINALITY LIMIT 2 OFFSET 1"),
    case("show series exact cardinality from missing", "SHOW SERIES EXACT CARDINALITY FROM nosuch"),
    case("show series cardinality missing value", "SHOW SERIES CARDINALITY WHERE host = 'nobody'"),
    case("show series exact cardinality on missing database",
         "SHOW SERIES EXACT CARDINALITY ON nosuchdb", names="nosuchdb"),
    case("show series exact cardinality from missing database",
         "SHOW SERIES EXACT CARDINALITY FROM nosuchdb..cpu", names="nosuchdb"),
    case("show series exact cardinality from missing retention policy",
         "SHOW SERIES EXACT CARDINALITY FROM nosuch.cpu", names="nosuch"),
    case("show series exact cardinality from retention policy",
         "SHOW SERIES EXACT CARDINALITY FROM autogen.cpu"),
    case("show series exact cardinality time",
         "SHOW SERIES EXACT CARDINALITY WHERE time > now() - 1h", names="time in WHERE clause"),
    case("show series cardinality time",
         "SHOW SERIES CARDINALITY WHERE time > now() - 1h", names="time in WHERE clause"),
    case("show series cardinality slimit", "SHOW SERIES CARDINALITY SLIMIT 1", names="SLIMIT"),
    case("show measurement cardinality", "SHOW MEASUREMENT CARDINALITY"),
    case("show measurement cardinality on missing database",
         "SHOW MEASUREMENT CARDINALITY ON nosuchdb"),
    case("show measurement exact cardinality", "SHOW MEASUREMENT EXACT CARDINALITY"),
    case("show measurement exact cardinality on", "SHOW MEASUREMENT EXACT CARDINALITY ON $db",
         db=None),
    case("show measurement cardinality where", "SHOW MEASUREMENT CARDINALITY WHERE host = 'host_1'"),
    case("show measurement exact cardinality from regex",
         "SHOW MEASUREMENT EXACT CARDINALITY FROM /^c/"),
    case("show measurement cardinality from", "SHOW MEASUREMENT CARDINALITY FROM cpu"),
    case("show measurement exact cardinality group by",
         "SHOW MEASUREMENT EXACT CARDINALITY GROUP BY host, region"),
    case("show measurement exact cardinality group by star",
         "SHOW MEASUREMENT EXACT CARDINALITY FROM cpu, mem GROUP BY *"),
    case("show measurement cardinality limit", "SHOW MEASUREMENT CARDINALITY LIMIT 1"),
    case("show measurement exact cardinality offset", "SHOW MEASUREMENT EXACT CARDINALITY OFFSET 1"),
    case("show measurement exact cardinality from missing",
         "SHOW MEASUREMENT EXACT CARDINALITY FROM nosuch"),
    case("show measurement exact cardinality on missing database",
         "SHOW MEASUREMENT EXACT CARDINALITY ON nosuchdb", names="nosuchdb"),
    case("show measurement exact cardinality time",
         "SHOW MEASUREMENT EXACT CARDINALITY WHERE time > now() - 1h",
         names="time in WHERE clause"),
    case("show measurement cardinality with measurement",
         "SHOW MEASUREMENT CARDINALITY WITH MEASUREMENT =~ /c/", names="WITH"),
    case("show field key cardinality", "SHOW FIELD KEY CARDINALITY"),
    case("show field key exact cardinality", "SHOW FIELD KEY EXACT CARDINALITY"),
    case("show field key exact cardinality from", "SHOW FIELD KEY EXACT CARDINALITY ON $db FROM mem",
         db=None),
    case("show field key cardinality from regex", "SHOW FIELD KEY CARDINALITY FROM /^c/"),
    case("show field key cardinality where", "SHOW FIELD KEY CARDINALITY WHERE host = 'host_1'"),
    case("show field key exact cardinality group by",
         "SHOW FIELD KEY EXACT CARDINALITY FROM cpu, mem GROUP BY host"),
    case("show field key exact cardinality group by star",
         "SHOW FIELD KEY EXACT CARDINALITY FROM cpu, clash GROUP BY *"),
    case("show field key exact cardinality limit offset",
         "SHOW FIELD KEY EXACT CARDINALITY LIMIT 1 OFFSET 1"),
    case("show field key exact cardinality from missing",
         "SHOW FIELD KEY EXACT CARDINALITY FROM nosuch"),
    case("show field key cardinality missing value",
         "SHOW FIELD KEY CARDINALITY WHERE host = 'nobody'"),
    case("show field key cardinality on missing database",
         "SHOW FIELD KEY CARDINALITY ON nosuchdb", names="nosuchdb"),
    case("show field key exact cardinality from missing retention policy",
         "SHOW FIELD KEY EXACT CARDINALITY FROM nosuch.cpu", names="nosuch"),
    case("show field key exact cardinality time",
         "SHOW FIELD KEY EXACT CARDINALITY WHERE time > now() - 1h", names="time in WHERE clause"),
    case("show tag key cardinality", "SHOW TAG KEY CARDINALITY"),
    case("show tag key exact cardinality", "SHOW TAG KEY EXACT CARDINALITY"),
    case("show tag key cardinality from", "SHOW TAG KEY CARDINALITY FROM cpu"),
    case("show tag key exact cardinality from regex", "SHOW TAG KEY EXACT CARDINALITY FROM /^c/"),
    case("show tag key cardinality where", "SHOW TAG KEY CARDINALITY WHERE host = 'host_1'"),
    case("show tag key exact cardinality group by", "SHOW TAG KEY EXACT CARDINALITY GROUP BY host"),
    case("show tag key exact cardinality group by star",
         "SHOW TAG KEY EXACT CARDINALITY FROM cpu, net GROUP BY *"),
    case("show tag key exact cardinality limit offset",
         "SHOW TAG KEY EXACT CARDINALITY LIMIT 1 OFFSET 1"),
    case("show tag key exact cardinality from missing", "SHOW TAG KEY EXACT CARDINALITY FROM nosuch"),
    case("show tag key cardinality on missing database", "SHOW TAG KEY CARDINALITY ON nosuchdb",
         names="nosuchdb"),
    case("show tag key exact cardinality time",
         "SHOW TAG KEY EXACT CARDINALITY WHERE time > now() - 1h", names="time in WHERE clause"),
    case("show tag values cardinality", "SHOW TAG VALUES CARDINALITY WITH KEY = host"),
    case("show tag values exact cardinality", "SHOW TAG VALUES EXACT CARDINALITY WITH KEY = host"),
    case("show tag values cardinality from", "SHOW TAG VALUES CARDINALITY FROM cpu WITH KEY = host"),
    case("show tag values exact cardinality from regex",
         "SHOW TAG VALUES EXACT CARDINALITY FROM /^(mem|recent)$/ WITH KEY = host"),
    case("show tag values exact cardinality key in",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY IN (host, region)"),
    case("show tag values exact cardinality key regex",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY =~ /^(host|interface)$/"),
    case("show tag values exact cardinality key not equal",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY != host"),
    case("show tag values exact cardinality key not regex",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY !~ /o/"),
    case("show tag values exact cardinality quoted key",
         f'SHOW TAG VALUES EXACT CARDINALITY FROM {W} WITH KEY = "k,comma"'),
    case("show tag values cardinality where",
         "SHOW TAG VALUES CARDINALITY WITH KEY = host WHERE region = 'eu'"),
    case("show tag values exact cardinality group by",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY = host GROUP BY region"),
    case("show tag values exact cardinality group by its key",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY = host GROUP BY host"),
    case("show tag values exact cardinality group by star",
         "SHOW TAG VALUES EXACT CARDINALITY FROM cpu, mem WITH KEY = host GROUP BY *"),
    case("show tag values exact cardinality limit offset",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY = host LIMIT 1 OFFSET 1"),
    case("show tag values exact cardinality from missing",
         "SHOW TAG VALUES EXACT CARDINALITY FROM nosuch WITH KEY = host"),
    case("show tag values exact cardinality missing key",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY = nosuch"),
    case("show tag values cardinality on missing database",
         "SHOW TAG VALUES CARDINALITY ON nosuchdb WITH KEY = host", names="nosuchdb"),
    case("show tag values exact cardinality without key",
         "SHOW TAG VALUES EXACT CARDINALITY FROM cpu", names="WITH"),
    case("show tag values exact cardinality time",
         "SHOW TAG VALUES EXACT CARDINALITY WITH KEY = host WHERE time > now() - 1h",
         names="time in WHERE clause"),
    case("show cardinality with other statements",
         "SHOW MEASUREMENT EXACT CARDINALITY; SHOW USERS; SHOW TAG KEY CARDINALITY FROM net",
         names="SHOW USERS"),
    case("show measurements limit zero", "SHOW MEASUREMENTS LIMIT 0"),
    # SELECT: fields, tags, *
    case("select field", "SELECT usage_user FROM cpu WHERE host = 'host_1' AND time < 1699920300s"),
    case("select merges series by time",
         "SELECT usage_user, cores FROM cpu WHERE time < '2023-11-14T00:03:00Z'"),
    case("select fields and tags",
         "SELECT usage_user, host, region FROM cpu "
         "WHERE time >= '2023-11-14T00:10:00Z' AND time < '2023-11-14T00:12:00Z'"),
    case("select star", "SELECT * FROM mem WHERE host = 'host_2'"),
    case("select star every type", "SELECT * FROM mem WHERE time <= '2023-11-14T00:10:00Z'"),
    case("select string and boolean",
         "SELECT status, ok FROM mem WHERE host = 'host_1' AND time < '2023-11-14T00:30:00Z'"),
    case("select sparse field", "SELECT temp FROM cpu WHERE time < '2023-11-14T00:15:00Z'"),
    case("select sparse beside dense",
         "SELECT temp, usage_user FROM cpu WHERE time < '2023-11-14T00:02:00Z'"),
    case("select alias", "SELECT usage_user AS u, host AS h FROM cpu WHERE time < 1699920060s"),
    case("select quoted measurement", f"SELECT * FROM {W}"),
    case("select quoted tag with space", f"SELECT value FROM {W} WHERE \"tag key\" = 'v a l'"),
    case("select tag with quotes",
         f"SELECT value, \"quote\\\"d\" FROM {W} WHERE \"quote\\\"d\" = 'it\\'s \"q\"'"),
    case("select unicode tag", f"SELECT n FROM {W} WHERE \"ключ\" = 'значение'"),
    case("select keyword tag", f"SELECT n, \"select\" FROM {W} WHERE \"select\" = 'where'"),
    case("select comma and equals tags",
         f"SELECT value FROM {W} WHERE \"k=eq\" = 'x=y' AND \"k,comma\" = 'a,b'"),
    case("select tag and field with one key", "SELECT * FROM clash"),
    # WHERE on tags
    case("where not equal", f"SELECT usage_system FROM cpu WHERE host != 'host_1' AND {SPAN} LIMIT 4"),
    case("where regex", "SELECT count(usage_user) FROM cpu WHERE host =~ /^host_[12]$/"),
    case("where not regex", "SELECT usage_user FROM cpu WHERE host !~ /^host_[12]$/ LIMIT 3"),
    case("where or", "SELECT count(usage_user) FROM cpu WHERE host = 'host_1' OR host = 'host_3'"),
    case("where parentheses",
         "SELECT usage_user FROM cpu WHERE (host = 'host_1' OR region = 'us west') "
         "AND time >= '2023-11-14T00:05:00Z' AND time < '2023-11-14T00:07:00Z'"),
    case("where and or parentheses",
         "SELECT count(cores) FROM cpu WHERE region = 'eu' AND (host = 'host_2' OR host = 'host_3')"),
    case("where missing tag value", "SELECT * FROM cpu WHERE host = 'host_9'"),
    case("where missing measurement", "SELECT * FROM nosuch"),
    case("where empty time range", "SELECT * FROM cpu WHERE time > '2030-01-01T00:00:00Z'"),
    case("where empty group by time",
         "SELECT mean(usage_user) FROM cpu WHERE time >= '2030-01-01T00:00:00Z' "
         "AND time < '2030-01-01T00:10:00Z' GROUP BY time(5m)"),
    # WHERE on time
    case("time rfc3339",
         "SELECT usage_user FROM cpu WHERE host = 'host_2' "
         "AND time >= '2023-11-14T00:05:00Z' AND time <= '2023-11-14T00:07:30Z'"),
    case("time rfc3339 fraction",
         "SELECT usage_user FROM cpu WHERE time > '2023-11-14T00:04:59.5Z' "
         "AND time < '2023-11-14T00:05:30.000000001Z'"),
    case("time epoch seconds",
         "SELECT bytes_recv FROM net WHERE time >= 1699920300s AND time < 1699920420s"),
    case("time epoch ms", "SELECT bytes_recv FROM net WHERE time = 1699920300000ms"),
    case("time epoch ns", "SELECT usage_user FROM cpu WHERE time >= 1699921740000000000"),
    case("time now minus", "SELECT value FROM recent WHERE time > now() - 1h"),
    case("time now minus before", "SELECT value FROM recent WHERE time < now() - 1h"),
    case("time now minus minutes", "SELECT max(value) FROM recent WHERE time > now() - 25m GROUP BY host"),
    # Aggregates over everything: time is the epoch (or the point's, for one selector)
    case("mean", "SELECT mean(usage_user) FROM cpu"),
    case("aggregates together",
         "SELECT mean(usage_user), sum(usage_user), count(usage_user), min(usage_user), "
         "max(usage_user), median(usage_user) FROM cpu"),
    case("aggregates in a range",
         f"SELECT mean(usage_user), max(usage_user), min(usage_system) FROM cpu WHERE {SPAN}"),
    case("max selector time", "SELECT max(usage_user) FROM cpu"),
    case("min selector with tag", "SELECT min(available_percent), host FROM mem"),
    case("first and last", "SELECT first(status), last(status) FROM mem"),
    case("first selector", "SELECT first(used) FROM mem WHERE host = 'host_2'"),
    case("last selector boolean", "SELECT last(ok) FROM mem"),
    case("count string and boolean", "SELECT count(status), count(ok) FROM mem"),
    case("sum integer", "SELECT sum(used) FROM mem"),
    case("mean integer", "SELECT mean(used) FROM mem"),
    case("median even", "SELECT median(used) FROM mem WHERE host = 'host_1'"),
    case("percentile", "SELECT percentile(usage_user, 90) FROM cpu"),
    case("percentile 50 and 5", "SELECT percentile(usage_user, 50), percentile(usage_system, 5) FROM cpu"),
    case("percentile in a range", f"SELECT percentile(usage_user, 95) FROM cpu WHERE {SPAN}"),
    case("spread and stddev", "SELECT spread(usage_user), stddev(usage_user), stddev(cores) FROM cpu GROUP BY host"),
    case("stddev of one point", "SELECT stddev(v) FROM fine WHERE time > '2023-11-14T00:05:00Z'"),
    case("aggregate alias", "SELECT mean(usage_user) AS avg, max(usage_user) AS top FROM cpu"),
    case("aggregate of missing field", "SELECT mean(nosuch) FROM cpu"),
    # GROUP BY tags
    case("group by tag", "SELECT mean(usage_user) FROM cpu GROUP BY host"),
    case("group by two tags", "SELECT count(usage_user) FROM cpu GROUP BY region, host"),
    case("group by star", "SELECT last(bytes_recv) FROM net GROUP BY *"),
    case("group by quoted tag", f'SELECT sum(n) FROM {W} GROUP BY "tag key"'),
    case("group by unicode and keyword tags", f'SELECT max(value) FROM {W} GROUP BY "ключ", "select"'),
    case("group by star quoted", f"SELECT count(value) FROM {W} GROUP BY *"),
    case("group by missing tag", "SELECT count(used) FROM mem GROUP BY nosuch"),
    case("group by tag raw", "SELECT usage_user FROM cpu WHERE time < 1699920120s GROUP BY host"),
    case("group by star raw", "SELECT * FROM clash GROUP BY *"),
    # GROUP BY time, fill
    case("group by time",
         f"SELECT mean(usage_user) FROM cpu WHERE host = 'host_3' AND {SPAN} GROUP BY time(5m)"),
    case("fill null",
         f"SELECT mean(usage_user) FROM cpu WHERE host = 'host_3' AND {SPAN} GROUP BY time(5m) fill(null)"),
    case("fill none",
         f"SELECT mean(usage_user) FROM cpu WHERE host = 'host_3' AND {SPAN} GROUP BY time(5m) fill(none)"),
    case("fill previous",
         f"SELECT max(temp) FROM cpu WHERE {SPAN} GROUP BY time(5m) fill(previous)"),
    case("fill zero",
         f"SELECT count(temp), sum(temp) FROM cpu WHERE {SPAN} GROUP BY time(5m) fill(0)"),
    case("fill linear",
         f"SELECT mean(temp) FROM cpu WHERE {SPAN} GROUP BY time(5m) fill(linear)"),
    case("fill linear integer",
         f"SELECT last(cores) FROM cpu WHERE host = 'host_3' AND {SPAN} GROUP BY time(3m) fill(linear)"),
    case("group by time and tag",
         f"SELECT count(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(10m), host fill(0)"),
    case("many intervals fill none",
         f"SELECT count(v) FROM daily WHERE {DAYS} GROUP BY time(100ms) fill(none)", names="intervals"),
    case("group by time unaligned range",
         "SELECT sum(usage_system) FROM cpu WHERE time >= '2023-11-14T00:00:30Z' "
         "AND time < '2023-11-14T00:07:00Z' GROUP BY time(2m)"),
    case("group by time selectors",
         f"SELECT first(usage_user), last(usage_user), min(usage_user), max(usage_user) "
         f"FROM cpu WHERE host = 'host_1' AND {SPAN} GROUP BY time(10m)"),
    case("group by time median percentile",
         f"SELECT median(usage_user), percentile(usage_user, 75) FROM cpu WHERE {SPAN} GROUP BY time(15m)"),
    case("group by time strings",
         "SELECT count(status), last(status) FROM mem WHERE time >= '2023-11-14T00:00:00Z' "
         "AND time < '2023-11-14T01:00:00Z' GROUP BY time(20m)"),
    case("group by time order desc",
         f"SELECT mean(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(10m) ORDER BY time DESC"),
    case("group by time now",
         "SELECT count(value) FROM recent WHERE time > now() - 1h GROUP BY time(1h), host"),
    case("group by time star", f"SELECT max(bytes_recv) FROM net WHERE {SPAN} GROUP BY time(5m), * fill(none)"),
    # Arithmetic and math functions
    case("math on raw fields", "SELECT used / 3, used * 2, used + 1.5, -used, 2 - used FROM mem "
                               "WHERE host = 'host_1' LIMIT 3"),
    case("math integer division and modulo",
         "SELECT used / 0, used % 7, used % 0, available_percent % 3, available_percent % 0, "
         "available_percent / 0 FROM mem LIMIT 4"),
    case("math bitwise", "SELECT used & 3, used | 1, used ^ 5 FROM mem WHERE host = 'host_2' LIMIT 3"),
    case("math bitwise on a float", "SELECT available_percent & 3 FROM mem", names="type error"),
    case("math on a string", "SELECT status * 2 FROM mem", names="type error"),
    case("math on a boolean", "SELECT ok + 1 FROM mem", names="type error"),
    case("math precedence and parentheses",
         "SELECT used + 2 * 3, (used + 2) * 3, used - 2 - 3, used / 2 / 5, -(used - 1) * 2 "
         "FROM mem WHERE host = 'host_1' LIMIT 2"),
    case("math two fields", "SELECT used + available_percent, used * available_percent AS x FROM mem LIMIT 3"),
    case("math with a sparse field",
         "SELECT usage_user + temp, temp * 2 FROM cpu WHERE time < '2023-11-14T00:02:00Z'"),
    case("math overflow wraps", "SELECT v * 2, v + 9223372036854775807 FROM big"),
    case("math functions",
         "SELECT abs(used), round(used), floor(available_percent), ceil(available_percent), "
         "round(available_percent - 0.5), sqrt(used), pow(used, 2), log(used, 10), "
         "log2(used), log10(used), ln(used), exp(available_percent / 10) FROM mem LIMIT 3"),
    case("math trigonometry",
         "SELECT sin(used), cos(used), tan(used), asin(available_percent / 100), "
         "acos(available_percent / 100), atan(used), atan2(used, available_percent) FROM mem LIMIT 3"),
    case("math not a number is null", "SELECT ln(-1 * used), sqrt(-1 * used), asin(used) FROM mem LIMIT 2"),
    case("math function of a string", "SELECT abs(status), abs(ok) FROM mem LIMIT 2"),
    case("math function nested", "SELECT abs(round(available_percent) - 50) * 2 FROM mem LIMIT 4"),
    case("math no variable", "SELECT 1 + 2 FROM mem", names="variable"),
    case("math wrong arity", "SELECT round(used, 2) FROM mem", names="arguments"),
    case("math and in select", "SELECT used AND 1 FROM mem", names="AND"),
    case("math on aggregates",
         "SELECT mean(usage_user) * 100, max(usage_user) - min(usage_user), count(usage_user) / 2, "
         "sum(cores) / 2, max(cores) / 4 FROM cpu"),
    case("math on aggregates by tag",
         "SELECT mean(usage_user) / max(cores), sqrt(mean(usage_user)) FROM cpu GROUP BY host"),
    case("math on a selector keeps its time", "SELECT max(usage_user) * 2 FROM cpu"),
    case("math on a selector with a tag", "SELECT max(usage_user) * 2, host FROM cpu"),
    case("math on aggregates by time",
         f"SELECT mean(usage_user) + 1, abs(min(usage_user) - 5) FROM cpu WHERE host = 'host_3' "
         f"AND {SPAN} GROUP BY time(5m)"),
    case("math after fill",
         f"SELECT mean(usage_user) + 1 FROM cpu WHERE host = 'host_3' AND {SPAN} GROUP BY time(5m) fill(0)"),
    case("math after fill linear",
         f"SELECT mean(temp) * 10 FROM cpu WHERE {SPAN} GROUP BY time(5m) fill(linear)"),
    case("math on a transformation",
         f"SELECT derivative(mean(usage_user)) * 2 FROM cpu WHERE {SPAN} GROUP BY time(5m)"),
    case("math on a raw transformation",
         "SELECT difference(bytes_recv) / 10 FROM net WHERE host = 'host_2'"),
    case("math inside an aggregate", "SELECT mean(usage_user * 2) FROM cpu", names="mean"),
    case("math with an alias and repeated names",
         "SELECT used * 2, used * 3, used AS u FROM mem WHERE host = 'host_2' LIMIT 2"),
    case("math mixing aggregate and raw", "SELECT mean(usage_user), usage_user * 2 FROM cpu",
         names="mixing"),
    # derivative, non_negative_derivative, difference
    case("derivative", "SELECT derivative(bytes_recv) FROM net WHERE host = 'host_1' AND interface = 'eth0'"),
    case("derivative unit", "SELECT derivative(packets, 1m) FROM net WHERE interface = 'wi fi'"),
    case("derivative across a reset", "SELECT derivative(bytes_recv, 1s) FROM net WHERE host = 'host_2'"),
    case("non negative derivative",
         "SELECT non_negative_derivative(bytes_recv, 1s) FROM net GROUP BY host, interface"),
    case("difference", "SELECT difference(bytes_recv) FROM net GROUP BY *"),
    case("non negative difference", "SELECT non_negative_difference(bytes_recv) FROM net WHERE host = 'host_2'"),
    case("non negative difference of last",
         f"SELECT non_negative_difference(last(bytes_recv)) FROM net WHERE {SPAN} GROUP BY time(4m), *"),
    case("derivative of mean",
         f"SELECT derivative(mean(packets), 1m) FROM net WHERE {SPAN} GROUP BY time(2m), host"),
    case("non negative derivative of max",
         f"SELECT non_negative_derivative(max(bytes_recv), 1s) FROM net WHERE host = 'host_2' "
         f"AND {SPAN} GROUP BY time(3m)"),
    case("difference of sum",
         f"SELECT difference(sum(bytes_recv)) FROM net WHERE {SPAN} GROUP BY time(5m)"),
    case("derivative order desc",
         "SELECT derivative(bytes_recv) FROM net WHERE host = 'host_2' ORDER BY time DESC LIMIT 4"),
    case("derivative beside its aggregate",
         f"SELECT mean(usage_user), derivative(mean(usage_user)) FROM cpu WHERE {SPAN} GROUP BY time(5m)"),
    case("transformations beside aggregates with fill",
         f"SELECT max(temp), difference(max(temp)), cumulative_sum(max(temp)) FROM cpu WHERE {SPAN} "
         f"GROUP BY time(5m)"),
    case("derivative beside a raw field", "SELECT derivative(bytes_recv), packets FROM net", names="mixing"),
    case("derivative beside an aggregate without interval",
         "SELECT derivative(bytes_recv), mean(packets) FROM net", names="mixing"),
    # moving_average, elapsed
    case("moving average", "SELECT moving_average(usage_user, 3) FROM cpu WHERE host = 'host_1' LIMIT 5"),
    case("moving average of integers", "SELECT moving_average(cores, 2) FROM cpu WHERE host = 'host_1' LIMIT 2"),
    case("moving average by tag", "SELECT moving_average(bytes_recv, 4) FROM net GROUP BY *"),
    case("moving average of mean skips empty intervals",
         f"SELECT moving_average(mean(usage_user), 2) FROM cpu WHERE host = 'host_3' AND {SPAN} GROUP BY time(5m)"),
    case("moving average of max by tag",
         f"SELECT moving_average(max(usage_user), 3) FROM cpu WHERE {SPAN} GROUP BY time(4m), host"),
    case("moving average order desc",
         "SELECT moving_average(bytes_recv, 2) FROM net WHERE host = 'host_2' ORDER BY time DESC LIMIT 3"),
    case("moving average window too small", "SELECT moving_average(usage_user, 1) FROM cpu", names="window"),
    case("moving average without window", "SELECT moving_average(usage_user) FROM cpu", names="arguments"),
    case("moving average of a string", "SELECT moving_average(status, 2) FROM mem", names="moving"),
    case("elapsed", "SELECT elapsed(usage_user) FROM cpu WHERE host = 'host_2' LIMIT 3"),
    case("elapsed unit across a gap",
         "SELECT elapsed(usage_user, 1m) FROM cpu WHERE host = 'host_3' AND time > '2023-11-14T00:08:00Z' LIMIT 4"),
    case("elapsed of merged series counts equal times",
         "SELECT elapsed(usage_user) FROM cpu WHERE time < '2023-11-14T00:02:00Z'"),
    case("elapsed of strings and sparse fields",
         "SELECT elapsed(status, 1m) FROM mem WHERE host = 'host_1' LIMIT 3"),
    case("elapsed two columns",
         "SELECT elapsed(usage_user, 1m), elapsed(temp, 1m) FROM cpu WHERE time < '2023-11-14T00:03:00Z'"),
    case("elapsed of mean", f"SELECT elapsed(mean(usage_user), 1m) FROM cpu WHERE {SPAN} GROUP BY time(10m)"),
    case("elapsed of count fill none",
         f"SELECT elapsed(count(temp), 1s) FROM cpu WHERE {SPAN} GROUP BY time(5m) fill(none)"),
    case("elapsed zero unit", "SELECT elapsed(usage_user, 0s) FROM cpu", names="positive"),
    case("cumulative sum of integers", "SELECT cumulative_sum(cores) FROM cpu WHERE host = 'host_2' LIMIT 3"),
    case("cumulative sum of mean", f"SELECT cumulative_sum(mean(usage_user)) FROM cpu WHERE {SPAN} "
                                   f"GROUP BY time(5m) fill(none)"),
    # top, bottom, distinct, count(distinct), mode, integral, sample
    case("top three", "SELECT top(usage_user, 3) FROM cpu"),
    case("top beside bottom", "SELECT top(cores, 3), bottom(cores, 4) FROM cpu", names="combined"),
    case("top of integers with ties", "SELECT top(cores, 3) FROM cpu"),
    case("bottom of integers with ties", "SELECT bottom(cores, 4) FROM cpu"),
    case("top by tag", "SELECT top(usage_user, host, 2) FROM cpu"),
    case("top by two tags", "SELECT top(usage_user, host, region, 2) FROM cpu"),
    case("top with a tag beside", "SELECT top(usage_user, 2), host FROM cpu"),
    case("top by tag with a field beside", "SELECT top(cores, host, 2), usage_user FROM cpu"),
    case("bottom by time", f"SELECT bottom(usage_user, 2) FROM cpu WHERE {SPAN} GROUP BY time(10m)"),
    case("top by time and tag", f"SELECT top(usage_user, 2) FROM cpu WHERE {SPAN} GROUP BY time(10m), host"),
    case("top ignores fill", f"SELECT top(usage_user, 2) FROM cpu WHERE host = 'host_3' AND {SPAN} "
                             f"GROUP BY time(5m) fill(0)"),
    case("top limit", "SELECT top(bytes_recv, 3) FROM net WHERE host = 'host_2' LIMIT 3"),
    case("top math", "SELECT top(usage_user, 2) * 2 FROM cpu"),
    case("top larger than limit", "SELECT top(usage_user, 2) FROM cpu LIMIT 1", names="LIMIT"),
    case("top with another function", "SELECT max(usage_user), top(usage_user, 2) FROM cpu",
         names="combined"),
    case("top of zero", "SELECT top(usage_user, 0) FROM cpu", names="at least 1"),
    case("top without n", "SELECT top(usage_user) FROM cpu", names="arguments"),
    case("top of a float n", "SELECT top(usage_user, 2.5) FROM cpu", names="integer"),
    case("distinct", "SELECT distinct(status) FROM mem"),
    case("distinct by tag", "SELECT distinct(cores) FROM cpu GROUP BY host"),
    case("distinct by time", "SELECT distinct(temp) FROM cpu WHERE " + SPAN + " GROUP BY time(5m)"),
    case("distinct limit", "SELECT distinct(status) FROM mem LIMIT 2"),
    case("distinct with another function", "SELECT distinct(cores), mean(cores) FROM cpu",
         names="combined"),
    case("distinct of every field", "SELECT distinct(*) FROM mem", names="distinct"),
    case("count distinct", "SELECT count(distinct(status)), count(distinct(used)) FROM mem"),
    case("count distinct by time", f"SELECT count(distinct(temp)) FROM cpu WHERE {SPAN} GROUP BY time(5m)"),
    case("count distinct beside mean", "SELECT count(distinct(status)), mean(used) FROM mem"),
    case("mode", "SELECT mode(used), mode(available_percent) FROM mem"),
    case("mode of strings and booleans", "SELECT mode(ok), mode(status) FROM mem GROUP BY host"),
    case("mode by time", f"SELECT mode(temp) FROM cpu WHERE {SPAN} GROUP BY time(10m)"),
    case("mode beside other aggregates", "SELECT mode(cores), max(cores), count(cores) FROM cpu GROUP BY region"),
    case("integral", "SELECT integral(usage_user) FROM cpu GROUP BY host"),
    case("integral of merged series", "SELECT integral(usage_user) FROM cpu"),
    case("integral unit by time", f"SELECT integral(usage_user, 1m) FROM cpu WHERE {SPAN} GROUP BY time(10m)"),
    case("integral with gaps", f"SELECT integral(temp, 1m) FROM cpu WHERE {SPAN} GROUP BY time(5m)"),
    case("integral of integers", "SELECT integral(bytes_recv, 1m) FROM net GROUP BY *"),
    case("integral of a string", "SELECT integral(status) FROM mem", names="integral"),
    case("sample of every point", "SELECT sample(usage_user, 100) FROM cpu WHERE host = 'host_2' "
                                  "AND time < '2023-11-14T00:03:00Z'"),
    case("sample of every point by time",
         f"SELECT sample(temp, 50) FROM cpu WHERE {SPAN} GROUP BY time(10m)"),
    # Subqueries
    case("subquery max of means", f"SELECT max(m) FROM (SELECT mean(usage_user) AS m FROM cpu "
                                  f"WHERE {SPAN} GROUP BY time(10m), host)"),
    case("subquery takes the outer time range", f"SELECT max(m) FROM (SELECT mean(usage_user) AS m "
                                                f"FROM cpu GROUP BY time(10m), host) WHERE {SPAN}"),
    case("subquery grouped by an inner tag",
         f"SELECT max(m) FROM (SELECT mean(usage_user) AS m FROM cpu WHERE {SPAN} "
         f"GROUP BY time(10m), host) GROUP BY host"),
    case("subquery raw with a tag condition",
         f"SELECT m FROM (SELECT mean(usage_user) AS m FROM cpu WHERE {SPAN} GROUP BY time(10m), host) "
         f"WHERE host = 'host_1'"),
    case("subquery math with a field condition",
         f"SELECT m * 2 FROM (SELECT mean(usage_user) AS m FROM cpu WHERE {SPAN} "
         f"GROUP BY time(10m), host) WHERE m > 6"),
    case("subquery of raw points", f"SELECT sum(usage_user) FROM (SELECT usage_user FROM cpu "
                                   f"WHERE host = 'host_1' AND {SPAN})"),
    case("subquery by time", f"SELECT mean(max) FROM (SELECT max(usage_user) FROM cpu WHERE {SPAN} "
                             f"GROUP BY time(10m), host) WHERE {SPAN} GROUP BY time(20m)"),
    case("subquery star", f"SELECT * FROM (SELECT mean(usage_user) AS m FROM cpu WHERE {SPAN} "
                          f"GROUP BY time(15m), host)"),
    case("subquery count skips empty intervals",
         f"SELECT count(m) FROM (SELECT mean(usage_user) AS m FROM cpu WHERE {SPAN} GROUP BY time(10m), host)"),
    case("subqueries of two measurements",
         "SELECT max(m) FROM (SELECT mean(usage_user) AS m FROM cpu GROUP BY host), "
         "(SELECT mean(used) AS m FROM mem GROUP BY host)"),
    case("subquery nested twice",
         f"SELECT max(s) FROM (SELECT sum(m) AS s FROM (SELECT mean(usage_user) AS m FROM cpu "
         f"WHERE {SPAN} GROUP BY time(5m), host) GROUP BY time(10m))"),
    case("subquery of a derivative",
         "SELECT max(d) FROM (SELECT non_negative_derivative(bytes_recv, 1s) AS d FROM net GROUP BY *) "
         "GROUP BY host"),
    case("subquery top of maxes",
         f"SELECT top(m, 2) FROM (SELECT max(usage_user) AS m FROM cpu WHERE {SPAN} GROUP BY time(5m))"),
    case("subquery with its own limit",
         "SELECT sum(used) FROM (SELECT used FROM mem WHERE host = 'host_2' LIMIT 3)"),
    case("subquery with fill", f"SELECT count(m) FROM (SELECT mean(temp) AS m FROM cpu WHERE {SPAN} "
                               f"GROUP BY time(5m) fill(0))"),
    case("subquery of strings", "SELECT count(status), last(status) FROM (SELECT status FROM mem) GROUP BY host"),
    case("subquery given the outer group by", "SELECT count(status) FROM (SELECT last(status) AS status "
                                              "FROM mem) GROUP BY host"),
    case("subquery limit per outer group", "SELECT count(used) FROM (SELECT used FROM mem LIMIT 3) GROUP BY host"),
    case("subquery star of raw points",
         "SELECT * FROM (SELECT status FROM mem WHERE time < '2023-11-14T00:10:00Z')"),
    case("subquery tag condition on a tag it dropped",
         "SELECT count(status) FROM (SELECT status FROM mem) WHERE host = 'host_1'"),
    case("subquery of a missing measurement", "SELECT max(m) FROM (SELECT mean(x) AS m FROM nosuch)"),
    case("subquery unclosed", "SELECT max(m) FROM (SELECT mean(x) AS m FROM cpu", names="found"),
    # Technical analysis and predictors
    case("exponential moving average", "SELECT exponential_moving_average(usage_user, 4) FROM cpu "
                                       "WHERE host = 'host_1' LIMIT 6"),
    case("ema warmup types",
         "SELECT exponential_moving_average(bytes_recv, 3, -1, 'simple'), "
         "exponential_moving_average(bytes_recv, 3, 0, 'exponential'), "
         "exponential_moving_average(bytes_recv, 3, 2) FROM net WHERE host = 'host_2'"),
    case("ema warmup type none", "SELECT exponential_moving_average(bytes_recv, 3, 2, 'none') FROM net",
         names="warmup"),
    case("double and triple ema", "SELECT double_exponential_moving_average(packets, 3), "
                                  "triple_exponential_moving_average(packets, 2) FROM net GROUP BY *"),
    case("relative strength index", "SELECT relative_strength_index(usage_user, 5) FROM cpu GROUP BY host"),
    case("triple exponential derivative", "SELECT triple_exponential_derivative(bytes_recv, 2) FROM net "
                                          "WHERE host = 'host_1'"),
    case("kaufmans", "SELECT kaufmans_efficiency_ratio(usage_user, 4), "
                     "kaufmans_adaptive_moving_average(usage_user, 4) FROM cpu WHERE host = 'host_3'"),
    case("chande momentum oscillator", "SELECT chande_momentum_oscillator(usage_system, 4) FROM cpu "
                                       "WHERE host = 'host_2'"),
    case("chande momentum oscillator simple",
         "SELECT chande_momentum_oscillator(usage_system, 3, 0, 'simple') FROM cpu WHERE host = 'host_2'"),
    case("ema of mean reads the interval before the range",
         f"SELECT exponential_moving_average(mean(usage_user), 3) FROM cpu WHERE "
         f"time >= '2023-11-14T00:10:00Z' AND time < '2023-11-14T00:30:00Z' GROUP BY time(2m)"),
    case("rsi of max by tag",
         f"SELECT relative_strength_index(max(bytes_recv), 3) FROM net WHERE {SPAN} GROUP BY time(2m), host"),
    case("ema of a string", "SELECT exponential_moving_average(status, 2) FROM mem", names="exponential"),
    case("ema without period", "SELECT exponential_moving_average(usage_user) FROM cpu", names="arguments"),
    case("holt winters", f"SELECT holt_winters(mean(usage_user), 4, 0) FROM cpu WHERE host = 'host_1' "
                         f"AND {SPAN} GROUP BY time(3m)"),
    case("holt winters seasonal", f"SELECT holt_winters(max(usage_user), 3, 4) FROM cpu WHERE "
                                  f"host = 'host_2' AND {SPAN} GROUP BY time(2m)"),
    case("holt winters with fit", f"SELECT holt_winters_with_fit(first(usage_system), 2, 2) FROM cpu "
                                  f"WHERE host = 'host_3' AND {SPAN} GROUP BY time(4m)"),
    case("holt winters of raw points", "SELECT holt_winters(usage_user, 3, 1) FROM cpu", names="aggregate"),
    case("derivative of mean reads the interval before",
         "SELECT derivative(mean(usage_user)) FROM cpu WHERE time >= '2023-11-14T00:10:00Z' "
         "AND time < '2023-11-14T00:20:00Z' GROUP BY time(2m)"),
    case("difference and cumulative sum from inside the range",
         "SELECT difference(mean(usage_user)), cumulative_sum(mean(usage_user)) FROM cpu WHERE "
         "time >= '2023-11-14T00:10:00Z' AND time < '2023-11-14T00:16:00Z' GROUP BY time(2m)"),
    case("moving average and elapsed read the interval before",
         "SELECT moving_average(mean(usage_user), 3), elapsed(mean(usage_user)) FROM cpu WHERE "
         "time >= '2023-11-14T00:10:00Z' AND time < '2023-11-14T00:20:00Z' GROUP BY time(2m)"),
    case("ema answers the interval before the range",
         "SELECT exponential_moving_average(mean(usage_user), 3, 0), mean(usage_user) FROM cpu WHERE "
         "time >= '2023-11-14T00:10:00Z' AND time < '2023-11-14T00:16:00Z' GROUP BY time(2m)"),
    case("explain", "EXPLAIN SELECT mean(usage_user) FROM cpu GROUP BY host"),
    case("select a regex of fields", "SELECT /usage/ FROM cpu LIMIT 2", names="regex"),
    case("group by a regex of tags", "SELECT count(usage_user) FROM cpu GROUP BY /ho/", names="regex"),
    # tz
    case("tz group by day",
         f"SELECT sum(v) FROM daily WHERE {DAYS} GROUP BY time(1d) tz('America/Chicago')"),
    case("tz group by day and tag",
         f"SELECT count(v), first(v) FROM daily WHERE {DAYS} GROUP BY time(1d), site fill(0) "
         f"tz('America/Chicago')"),
    case("tz raw", "SELECT v FROM daily WHERE site = 'a' AND time < '2023-11-03T12:00:00Z' "
                   "tz('America/Chicago')"),
    case("tz across the change", "SELECT v FROM daily WHERE site = 'b' AND time >= "
                                 "'2023-11-05T03:00:00Z' AND time < '2023-11-05T10:00:00Z' "
                                 "tz('America/Chicago')"),
    case("utc group by day", f"SELECT sum(v) FROM daily WHERE {DAYS} GROUP BY time(1d)"),
    # ORDER BY, LIMIT, OFFSET, SLIMIT, SOFFSET
    case("order by time desc",
         "SELECT usage_user FROM cpu WHERE host = 'host_1' ORDER BY time DESC LIMIT 3"),
    case("limit offset", "SELECT usage_user FROM cpu WHERE host = 'host_2' LIMIT 2 OFFSET 3"),
    case("limit merged series", "SELECT usage_user FROM cpu LIMIT 3"),
    case("offset past the end", "SELECT usage_user FROM cpu WHERE host = 'host_1' OFFSET 100"),
    case("limit per series", "SELECT bytes_recv FROM net GROUP BY interface LIMIT 2"),
    case("limit group by time",
         f"SELECT mean(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(5m), host LIMIT 2 OFFSET 1"),
    case("slimit", "SELECT mean(usage_user) FROM cpu GROUP BY host SLIMIT 2"),
    case("slimit soffset", "SELECT usage_user FROM cpu GROUP BY host LIMIT 2 SLIMIT 1 SOFFSET 1"),
    case("soffset past the end", "SELECT mean(usage_user) FROM cpu GROUP BY host SLIMIT 2 SOFFSET 5"),
    # Several statements
    case("several statements",
         "SHOW MEASUREMENTS; SELECT count(used) FROM mem; SELECT * FROM nosuch; "
         "SHOW TAG VALUES FROM net WITH KEY = interface"),
    case("several statements with a semicolon in a string",
         "SELECT count(usage_user) FROM cpu WHERE host = 'a;b'; SELECT count(n) FROM " + W),
    # epoch= and chunked=
    case("epoch ms", "SELECT usage_user FROM cpu WHERE host = 'host_2' LIMIT 3", epoch="ms"),
    case("epoch s", "SELECT usage_user FROM cpu WHERE host = 'host_2' LIMIT 3", epoch="s"),
    case("epoch ns", "SELECT usage_user FROM cpu WHERE host = 'host_2' LIMIT 3", epoch="ns"),
    case("epoch u", "SELECT usage_user FROM cpu WHERE host = 'host_2' LIMIT 3", epoch="u"),
    case("epoch m rounds down", "SELECT usage_user FROM cpu WHERE host = 'host_2' LIMIT 3", epoch="m"),
    case("epoch h", "SELECT sum(v) FROM daily WHERE " + DAYS + " GROUP BY time(1d)", epoch="h"),
    case("epoch group by time", f"SELECT mean(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(10m)",
         epoch="s"),
    case("epoch tz", f"SELECT sum(v) FROM daily WHERE {DAYS} GROUP BY time(1d) tz('America/Chicago')",
         epoch="s"),
    case("epoch show", "SHOW TAG KEYS FROM cpu", epoch="ms"),
    case("chunked", "SELECT * FROM cpu", chunked="true"),
    case("chunked small chunks", "SELECT usage_user FROM cpu GROUP BY host", chunked="true",
         chunk_size="7"),
    case("chunked several statements",
         "SELECT * FROM mem; SHOW SERIES; SELECT mean(used) FROM mem GROUP BY host",
         chunked="true", chunk_size="5"),
    case("chunked epoch", "SELECT bytes_recv FROM net", chunked="true", epoch="s"),
    # Names, qualifiers, time forms and edges within the forms above
    case("keywords any case", "select MEAN(usage_user) from cpu Where host = 'host_1' group BY host LiMiT 1"),
    case("measurement names are case sensitive", "SELECT mean(usage_user) FROM CPU"),
    case("quoted field and measurement", 'SELECT "usage_user" FROM "cpu" WHERE "host" = \'host_3\' LIMIT 2'),
    case("from retention policy", 'SELECT count(used) FROM "autogen"."mem"'),
    case("from database and retention policy", 'SELECT count(used) FROM "$db"."autogen"."mem"', db=None),
    case("from database default retention policy", "SELECT count(used) FROM $db..mem", db=None),
    case("rp parameter", "SELECT count(used) FROM mem", rp="autogen"),
    case("show measurements on", "SHOW MEASUREMENTS ON $db", db=None),
    case("show tag keys on", "SHOW TAG KEYS ON $db FROM net", db=None),
    case("grafana style",
         "SELECT mean(\"usage_user\") FROM \"autogen\".\"cpu\" WHERE (\"host\" =~ /^host_[13]$/) "
         "AND time >= 1699920000000ms and time <= 1699921799000ms GROUP BY time(5m), \"host\" fill(null)"),
    case("regex with a slash and a space", "SELECT count(usage_user) FROM cpu WHERE region =~ /us\\/? w/"),
    case("regex on a quote", f"SELECT count(n) FROM {W} WHERE \"quote\\\"d\" =~ /^it's/"),
    case("not equal angle", "SELECT count(usage_user) FROM cpu WHERE host <> 'host_1'"),
    case("contradiction", "SELECT usage_user FROM cpu WHERE host = 'host_1' AND host = 'host_2'"),
    case("time equals", "SELECT * FROM mem WHERE time = '2023-11-14T00:10:00Z'"),
    case("time date only", "SELECT count(v) FROM daily WHERE time >= '2023-11-06' AND time < '2023-11-07'"),
    case("time with a space", "SELECT count(usage_user) FROM cpu WHERE time >= '2023-11-14 00:25:00'"),
    case("time now both sides", "SELECT value FROM recent WHERE time > now() - 95m AND time < now() - 35m"),
    case("time days and weeks", "SELECT count(v) FROM daily WHERE time > '2023-11-03T00:00:00Z' + 2d "
                                "AND time < '2023-11-03T00:00:00Z' + 1w"),
    case("limit zero", "SELECT usage_user FROM cpu WHERE host = 'host_3' LIMIT 0"),
    case("order by time asc", "SELECT usage_user FROM cpu WHERE host = 'host_1' ORDER BY time ASC LIMIT 2"),
    case("soffset without slimit", "SELECT count(bytes_recv) FROM net GROUP BY * SOFFSET 1"),
    case("offset group by time",
         f"SELECT count(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(5m) fill(none) OFFSET 4"),
    case("star group by tag limit", "SELECT * FROM net GROUP BY host LIMIT 1"),
    case("same function twice", "SELECT max(usage_user), max(usage_system), max(cores) FROM cpu"),
    case("selector with aggregate by time",
         f"SELECT max(usage_user), mean(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(10m)"),
    case("percentile edges", "SELECT percentile(used, 0), percentile(used, 100), percentile(used, 99.9) FROM mem"),
    case("median odd", "SELECT median(n) FROM " + W + " WHERE \"tag key\" = 'other'"),
    case("non negative derivative raw", "SELECT non_negative_derivative(bytes_recv) FROM net WHERE host = 'host_2'"),
    case("derivative of mean default unit",
         f"SELECT derivative(mean(bytes_recv)) FROM net WHERE {SPAN} GROUP BY time(5m)"),
    case("fill linear at the edges",
         "SELECT mean(temp) FROM cpu WHERE time >= '2023-11-13T23:50:00Z' AND time < '2023-11-14T00:40:00Z' "
         "GROUP BY time(5m) fill(linear)"),
    case("fill none everything empty",
         "SELECT count(temp) FROM cpu WHERE time >= '2023-11-14T00:10:00Z' AND time < '2023-11-14T00:20:00Z' "
         "GROUP BY time(5m) fill(none)"),
    case("tz aggregate without group by time",
         f"SELECT count(v) FROM daily WHERE {DAYS} tz('America/Chicago')"),
    case("tz hours", "SELECT sum(v) FROM daily WHERE time >= '2023-11-05T04:00:00Z' AND time < '2023-11-05T10:00:00Z' "
                     "GROUP BY time(1h) fill(none) tz('America/Chicago')"),
    case("tz selector", f"SELECT max(v) FROM daily WHERE {DAYS} tz('America/Chicago')"),
    case("show series with escaped tags", f"SHOW SERIES FROM {W} WHERE \"tag key\" = 'v a l'"),
    case("show tag values comma key", f'SHOW TAG VALUES FROM {W} WITH KEY = "k,comma"'),
    case("show tag values regex where", "SHOW TAG VALUES FROM net WITH KEY = interface WHERE host =~ /_2$/"),
    case("show tag values where time", "SHOW TAG VALUES FROM cpu WITH KEY = host WHERE time > 0",
         names="time"),
    case("show series where time", "SHOW SERIES WHERE time > now() - 1h", names="time"),
    case("keyword as bare name", f"SELECT value FROM {W} WHERE select = 'from'"),
    case("difference of strings", "SELECT difference(status) FROM mem", names="difference"),
    case("mean of booleans", "SELECT mean(ok) FROM mem", names="mean"),
    case("percentile over 100", "SELECT percentile(used, 101) FROM mem"),
    case("derivative bad unit", "SELECT derivative(bytes_recv, 'x') FROM net", names="derivative"),
    case("field twice", "SELECT usage_user, usage_user FROM cpu WHERE host = 'host_1' LIMIT 2"),
    case("tags only", "SELECT host, region FROM cpu"),
    case("time named", "SELECT time, usage_user FROM cpu WHERE host = 'host_1' LIMIT 2"),
    case("group by time now fill",
         "SELECT count(value) FROM recent WHERE time > now() - 2h GROUP BY time(30m), host fill(0)"),
    case("fill previous by tag",
         f"SELECT last(temp) FROM cpu WHERE {SPAN} GROUP BY time(10m), host fill(previous)"),
    # Times and values at the edges
    case("sub-second times", "SELECT * FROM fine"),
    case("sub-second epoch ms", "SELECT * FROM fine", epoch="ms"),
    case("sub-second epoch u", "SELECT * FROM fine", epoch="u"),
    case("sub-second epoch s", "SELECT * FROM fine", epoch="s"),
    case("sub-second range", "SELECT v FROM fine WHERE time > '2023-11-14T00:00:00.1Z' "
                             "AND time <= '2023-11-14T00:00:01.25Z'"),
    case("sub-second group by time",
         "SELECT count(v) FROM fine WHERE time >= '2023-11-14T00:00:00Z' "
         "AND time < '2023-11-14T00:00:01.5Z' GROUP BY time(250ms)"),
    case("before 1970", "SELECT * FROM old"),
    case("before 1970 epoch s", "SELECT * FROM old", epoch="s"),
    case("before 1970 epoch ms", "SELECT * FROM old", epoch="ms"),
    case("before 1970 group by time",
         "SELECT count(v), sum(v) FROM old WHERE time >= '1969-12-31T22:00:00Z' "
         "AND time < '1970-01-01T01:00:00Z' GROUP BY time(1h)"),
    case("before 1970 group by time seconds",
         "SELECT count(v) FROM old WHERE time >= '1969-12-31T23:59:57Z' AND time < '1970-01-01T00:00:01Z' "
         "GROUP BY time(1s) fill(none)"),
    case("strings to escape", "SELECT * FROM text"),
    case("string selectors", "SELECT first(s), last(s), count(s) FROM text"),
    case("strings to escape where", "SELECT s FROM text WHERE time = '2023-11-14T00:00:03Z'"),
    case("integers past 2^53", "SELECT * FROM big"),
    case("integers past 2^53 selectors", "SELECT max(v) FROM big"),
    case("integers past 2^53 first last", "SELECT first(v), last(v) FROM big"),
    # Forms dashboards also send
    case("show measurements limit", "SHOW MEASUREMENTS LIMIT 2 OFFSET 1"),
    case("show tag keys from regex", "SHOW TAG KEYS FROM /^(cpu|net)$/"),
    case("show measurements where", "SHOW MEASUREMENTS WHERE host = 'host_3'"),
    case("show series limit", "SHOW SERIES LIMIT 3 OFFSET 2"),
    case("show tag values limit", "SHOW TAG VALUES WITH KEY = host LIMIT 1"),
    case("show series from regex", "SHOW SERIES FROM /^c/"),
    case("show field keys from two", "SHOW FIELD KEYS FROM mem, net"),
    case("select from two measurements", "SELECT count(used), count(usage_user) FROM cpu, mem"),
    case("select from regex", "SELECT last(f) FROM /^cl/"),
    case("select mean of every field", "SELECT mean(*) FROM cpu WHERE host = 'host_3'"),
    case("select with types", "SELECT usage_user::field, host::tag FROM cpu WHERE time < 1699920060s"),
    case("select clash with types", "SELECT k::field, k::tag FROM clash"),
    case("select arithmetic", "SELECT usage_user * 2 + 1 FROM cpu WHERE host = 'host_1' LIMIT 2"),
    case("where on a float field", "SELECT usage_user, host FROM cpu WHERE usage_user > 12.4"),
    case("where on a string field", "SELECT used FROM mem WHERE status = 'red' AND host = 'host_1'"),
    case("where on fields and tags",
         "SELECT usage_user FROM cpu WHERE usage_user >= 12 AND usage_system < 5 AND region = 'eu'"),
    case("where on an integer field", "SELECT count(used) FROM mem WHERE used > 1100 GROUP BY host"),
    case("where on a field or a tag", "SELECT count(used) FROM mem WHERE used > 1100 OR host = 'host_1'",
         names="used"),
    case("where on a boolean field", "SELECT count(used) FROM mem WHERE ok = true GROUP BY host"),
    case("fill number", f"SELECT max(temp) FROM cpu WHERE {SPAN} GROUP BY time(5m) fill(-1)"),
    case("group by time offset",
         f"SELECT count(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(10m, 5m)"),
    case("now without data", "SELECT mean(usage_user) FROM cpu WHERE time > now() - 1h GROUP BY time(10m)"),
    case("post form body", "SELECT count(usage_user) FROM cpu GROUP BY region", method="POST"),
    case("bound parameters", "SELECT count(usage_user) FROM cpu WHERE host = $host AND time < $t",
         params='{"host": "host_1", "t": "2023-11-14T00:10:00Z"}'),
    case("show retention policies", "SHOW RETENTION POLICIES"),
    case("show retention policies on", "SHOW RETENTION POLICIES ON $db", db=None),
    case("missing retention policy", "SELECT * FROM nosuch.cpu", names="nosuch"),
    case("missing retention policy parameter", "SELECT count(used) FROM mem", rp="nosuch",
         names="nosuch"),
    case("selectors of every field", "SELECT last(*) FROM mem GROUP BY host"),
    case("max of every field by time",
         f"SELECT max(*) FROM cpu WHERE host = 'host_3' AND {SPAN} GROUP BY time(15m)"),
    case("show tag values from regex", "SHOW TAG VALUES FROM /^(mem|recent)$/ WITH KEY = host"),
    case("show field keys from regex", "SHOW FIELD KEYS FROM /^c/"),
    case("show series where regex alternation", "SHOW SERIES FROM cpu WHERE host =~ /1|3/"),
    case("first tie by time", f"SELECT first(status) FROM mem WHERE time >= '2023-11-14T00:00:00Z' "
                              f"AND time < '2023-11-14T01:00:00Z' GROUP BY time(30m)"),
    case("percentile tie", "SELECT percentile(usage_user, 50) FROM cpu WHERE time < '2023-11-14T00:02:00Z'"),
    case("time after now", "SELECT * FROM cpu WHERE time > now()"),
    case("chunked one row per chunk",
         "SELECT usage_user FROM cpu WHERE time < '2023-11-14T00:03:00Z' GROUP BY host; "
         "SELECT * FROM nosuch; SHOW TAG KEYS", chunked="true", chunk_size="1"),
    case("chunked with an error", "SELECT count(used) FROM mem; SELECT foo(x) FROM mem",
         chunked="true", names="foo"),
    case("chunked group by time epoch",
         f"SELECT mean(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(5m), host fill(linear)",
         chunked="true", chunk_size="4", epoch="ms"),
    case("cumulative sum", "SELECT cumulative_sum(used) FROM mem WHERE host = 'host_1' LIMIT 3"),
    # Statements InfluxDB answers and chingest refuses on purpose, naming
    # what to use instead (statements that change InfluxDB's state are
    # POSTed, as it asks).
    case("refused show users", "SHOW USERS", names="SHOW USERS"),
    case("refused create user", "CREATE USER bob WITH PASSWORD 'secret'", names="CREATE USER",
         method="POST"),
    case("refused set password", "SET PASSWORD FOR bob = 'other'", names="SET PASSWORD",
         method="POST"),
    case("refused grant", "GRANT READ ON $db TO bob", names="GRANT", method="POST"),
    case("refused show grants", "SHOW GRANTS FOR bob", names="SHOW GRANTS"),
    case("refused revoke", "REVOKE READ ON $db FROM bob", names="REVOKE", method="POST"),
    case("refused drop user", "DROP USER bob", names="DROP USER", method="POST"),
    case("refused show stats", "SHOW STATS FOR 'httpd'", names="SHOW STATS"),
    case("refused show diagnostics", "SHOW DIAGNOSTICS FOR 'build'", names="SHOW DIAGNOSTICS"),
    case("refused show queries", "SHOW QUERIES", names="SHOW QUERIES"),
    case("refused kill query", "KILL QUERY 1", names="KILL QUERY"),
    case("refused show shards", "SHOW SHARDS", names="SHOW SHARDS"),
    case("refused show shard groups", "SHOW SHARD GROUPS", names="SHOW SHARD GROUPS"),
    case("refused drop shard", "DROP SHARD 999999", names="DROP SHARD", method="POST"),
    case("refused show subscriptions", "SHOW SUBSCRIPTIONS", names="SHOW SUBSCRIPTIONS"),
    case("refused create subscription",
         "CREATE SUBSCRIPTION s ON $db.autogen DESTINATIONS ALL 'http://127.0.0.1:9'",
         names="CREATE SUBSCRIPTION", method="POST"),
    case("refused drop subscription", "DROP SUBSCRIPTION s ON $db.autogen",
         names="DROP SUBSCRIPTION", method="POST"),
    case("refused drop database", "DROP DATABASE nosuchdb", names="DROP DATABASE", method="POST"),
    case("refused drop retention policy", "DROP RETENTION POLICY nosuch ON $db",
         names="DROP RETENTION POLICY", method="POST"),
    # Errors
    case("parse error", "SELECT FROM cpu", names="FROM"),
    case("parse error at end", "SELECT usage_user FROM", names="EOF"),
    case("unknown statement", "SHOW FOO", names="FOO"),
    case("unterminated string", "SELECT * FROM cpu WHERE host = 'host_1", names="char 31"),
    case("show tag values without key", "SHOW TAG VALUES FROM cpu", names="WITH"),
    case("unknown function", "SELECT foo(usage_user) FROM cpu", names="foo"),
    case("aggregate beside star", "SELECT mean(usage_user), * FROM cpu", names="aggregate"),
    case("aggregate beside field", "SELECT mean(usage_user), usage_system FROM cpu",
         names="aggregate"),
    case("group by time without aggregate",
         f"SELECT usage_user FROM cpu WHERE {SPAN} GROUP BY time(1m)", names="aggregate"),
    case("wrong argument count", "SELECT percentile(usage_user) FROM cpu", names="percentile"),
    case("mean of strings", "SELECT mean(status) FROM mem", names="mean"),
    case("derivative of nothing", "SELECT derivative() FROM net", names="derivative"),
    case("order by tag", "SELECT usage_user FROM cpu ORDER BY host", names="ORDER BY time"),
    case("unknown time zone",
         "SELECT v FROM daily WHERE time < '2023-11-03T07:00:00Z' tz('Mars/Olympus')",
         names="Mars/Olympus"),
    case("bad fill", f"SELECT mean(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(5m) fill(sideways)",
         names="fill"),
    case("error in last statement", "SHOW MEASUREMENTS; SELECT foo(x) FROM cpu", names="foo"),
    case("error in a statement followed by others",
         "SELECT mean(usage_user) FROM cpu; SELECT foo(x) FROM cpu; SHOW MEASUREMENTS",
         names="foo"),
    case("error in the first of two statements",
         "SELECT mean(status) FROM mem; SHOW MEASUREMENTS", names="mean"),
    case("parse error in second statement",
         "SELECT mean(usage_user) FROM cpu; SELEC x; SHOW MEASUREMENTS", names="SELEC"),
    case("missing database", "SELECT mean(usage_user) FROM cpu", names="database", db=None),
    case("unknown database", "SELECT mean(usage_user) FROM cpu", names="nosuchdb", db="nosuchdb"),
    case("empty query", "", names='"q"'),
    # SELECT … INTO and continuous queries that write nothing (the rest
    # write: test_into_writes_as_influxdb, test_continuous_queries_as_influxdb).
    case("into from nothing", "SELECT * INTO into_nothing FROM nosuch", method="POST"),
    case("into missing database", "SELECT * INTO nosuchdb..m FROM cpu", names="nosuchdb"),
    case("into missing retention policy", "SELECT * INTO $db.nosuchrp.m FROM cpu",
         names="nosuchrp"),
    case("cq without into",
         "CREATE CONTINUOUS QUERY c ON $db BEGIN SELECT mean(usage_user) FROM cpu "
         "GROUP BY time(1m) END", names="INTO"),
    case("cq without group by time",
         "CREATE CONTINUOUS QUERY c ON $db BEGIN SELECT mean(usage_user) INTO m FROM cpu END",
         names="GROUP BY time"),
    case("cq resample for less than its interval",
         "CREATE CONTINUOUS QUERY c ON $db RESAMPLE FOR 30s BEGIN SELECT mean(usage_user) "
         "INTO m FROM cpu GROUP BY time(1m) END", names="minimum of 1m, got 30s"),
    case("cq resample nothing",
         "CREATE CONTINUOUS QUERY c ON $db RESAMPLE BEGIN SELECT mean(usage_user) INTO m "
         "FROM cpu GROUP BY time(1m) END", names="EVERY, FOR"),
    case("cq on missing database",
         "CREATE CONTINUOUS QUERY c ON nosuchdb BEGIN SELECT mean(usage_user) INTO m FROM cpu "
         "GROUP BY time(1m) END", names="nosuchdb"),
    case("cq of raw points",
         "CREATE CONTINUOUS QUERY raw ON $db BEGIN SELECT usage_user INTO m FROM cpu "
         "GROUP BY time(1m) END", names="aggregate", method="POST"),
    # Dropping one that is not there is no error; by GET, a warning.
    case("drop missing cq", "DROP CONTINUOUS QUERY nope ON $db"),
]

# --------------------------------------------------------------------------
# Where chingest answers differently on purpose, by name (as in
# docs/influxql.md): the cases that show it (statements above, or a test of
# this module), each with what differs. Each case checks it still differs; a
# statement with `names=` also that chingest's errors name it (InfluxDB's
# need not).

DIFFERENCES = {
    "error-before-other-statements": {
        "error in a statement followed by others":
            "InfluxDB answers 'not executed' for the failing statement, chingest its error",
        "error in the first of two statements":
            "InfluxDB answers 'not executed' for the failing statement, chingest its error",
    },
    "interval-limit": {
        "many intervals fill none": "InfluxDB answers 4.3 million intervals, chingest an error",
    },
    "unsupported-forms": {
        "derivative beside an aggregate without interval":
            "InfluxDB answers the raw points' derivative and the mean in rows of their own, "
            "chingest refuses mixing them",
        "where on a field or a tag": "InfluxDB answers, chingest asks for the field's condition "
                                     "to be joined with AND",
        "select a regex of fields": "InfluxDB answers usage_system and usage_user, chingest an "
                                    "error naming the regex",
        "group by a regex of tags": "InfluxDB groups by host, chingest answers an error naming "
                                    "the regex",
    },
    "top-limit": {
        "top limit": "InfluxDB answers the 3 greatest of the first few points, chingest the 3 "
                     "greatest",
    },
    "mode-ties": {
        "mode beside other aggregates": "InfluxDB picks 4 of 4 and 8, seen 30 times each; "
                                        "chingest 8",
    },
    "integral-series-order": {
        "integral": "InfluxDB answers host_3, host_2, host_1; chingest by tag values",
        "integral of integers": "InfluxDB answers (host_1, wi fi) before (host_1, eth0); "
                                "chingest by tag values",
    },
    "msgpack": {
        "test_msgpack_is_answered_in_json": "InfluxDB answers MessagePack when asked, chingest JSON",
    },
    "soffset-alone": {
        "soffset without slimit": "InfluxDB answers no series, chingest skips the first series",
    },
    "series-cardinality-per-shard": {
        "show series exact cardinality":
            "InfluxDB counts daily's 2 series once in each of the 2 weeks they span, chingest once",
        "show series exact cardinality group by every measurement":
            "InfluxDB counts daily's 2 series once in each of the 2 weeks they span, chingest once",
    },
    "show-time-conditions": {
        "show tag values where time": "InfluxDB answers every value as if the condition were "
                                      "not there, chingest an error",
        "show series where time": "InfluxDB answers the series with points in the shards of "
                                  "the range, chingest an error",
        "show tag values exact cardinality time": "InfluxDB answers nothing, chingest an error",
    },
    "refused-statements": {
        ident: "InfluxDB answers the statement, chingest an error naming it and what to use "
               "instead"
        for ident in ["show cardinality with other statements"] + [
            p.id for p in STATEMENTS if p.id.startswith("refused ")]
    },
    "explain-plan": {
        "explain": "InfluxDB lists its shards, files and blocks, chingest the store and the SQL",
    },
    "cq-raw-select": {
        "cq of raw points": "InfluxDB creates it (each period then fails), chingest refuses it",
    },
    "statement-text": {
        "test_into_by_get_warns_as_influxdb": "InfluxDB's warning quotes the statement as it "
                                              "rewrites it (names qualified), chingest's as sent",
        "test_continuous_queries_as_influxdb": "SHOW CONTINUOUS QUERIES: InfluxDB shows the "
                                               "statement as it rewrites it, chingest as sent",
    },
    "keyword-names": {
        "keyword as bare name": "InfluxDB refuses the keyword as a bare name, chingest reads "
                                "it as the tag's",
    },
}

EXPECTED = {ident: name for name, cases in DIFFERENCES.items() for ident in cases}

# --------------------------------------------------------------------------
# Asking and comparing.


def ask(url, q, params, token=None):
    """(HTTP status, answer) of a GET /query, or of a POST with `q` as a
    form field given `method="POST"`; a chunked answer's chunks are joined
    into one (see `join_chunks`)."""
    params = {k: v for k, v in params.items() if v is not None}
    method = params.pop("method", "GET")
    headers = {"Authorization": f"Token {token}"} if token else {}
    if method == "POST":
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        request = urllib.request.Request(f"{url}/query?{urllib.parse.urlencode(params)}",
                                         data=urllib.parse.urlencode({"q": q}).encode(),
                                         headers=headers, method="POST")
    else:
        request = urllib.request.Request(
            f"{url}/query?{urllib.parse.urlencode({'q': q, **params})}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    chunks = [json.loads(part) for part in text.splitlines() if part.strip()]
    assert chunks, f"empty answer ({status})"
    return status, join_chunks(chunks)


def join_chunks(chunks):
    """One answer from the documents of a chunked one: a statement's results
    in one result (InfluxDB sends a `SHOW`'s series in documents of their own,
    each a result without `"partial"`), a series continued in the next
    document (`"partial": true`) in one series. A lone document is the answer
    as it is."""
    if len(chunks) == 1:
        return chunks[0]
    joined = {"results": []}
    for chunk in chunks:
        if "error" in chunk:  # a request-wide error ends the stream
            joined["error"] = chunk["error"]
            continue
        for result in copy.deepcopy(chunk.get("results", [])):
            results = joined["results"]
            partial = result.pop("partial", False)
            series = result.pop("series", [])
            if results and results[-1]["statement_id"] == result["statement_id"]:
                into = results[-1]
                into.update(result)
            else:
                results.append(result)
                into = result
            into["partial"] = partial
            for one in series:
                previous = into.get("series", [])[-1:]
                if previous and previous[0].pop("partial", False):
                    assert (previous[0].get("name"), previous[0].get("tags")) == \
                        (one.get("name"), one.get("tags")), f"a partial series not continued: {chunks}"
                    previous[0]["values"] += one["values"]
                    previous[0]["partial"] = one.get("partial", False)
                else:
                    into.setdefault("series", []).append(one)
    for result in joined["results"]:
        assert not result.pop("partial"), f"a partial result not continued: {chunks}"
        for one in result.get("series", []):
            assert not one.pop("partial", False), f"a partial series not continued: {chunks}"
    if not joined["results"]:
        del joined["results"]
    return joined


def row_text(row):
    """A row's text with every number a float: `40` and `40.0` are one
    value, which JSON writers spell either way."""
    def number(cell):
        plain = isinstance(cell, (int, float)) and not isinstance(cell, bool)
        return float(cell) if plain else cell
    return json.dumps([number(cell) for cell in row])


def in_time_order(answer):
    """The answer with each series' rows of equal time in one order (by
    their text): the only order InfluxDB promises is by time."""
    answer = copy.deepcopy(answer)
    for result in answer.get("results", []):
        for series in result.get("series", []):
            runs = []
            for row in series.get("values", []):
                if runs and runs[-1][0][0] == row[0]:
                    runs[-1].append(row)
                else:
                    runs.append([row])
            series["values"] = [row for run in runs for row in sorted(run, key=row_text)]
    return answer


def same(a, b):
    """Equal JSON, floats within a relative 1e-9 (and 1e-12 near zero):
    the engines add in different orders."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def errors_of(answer):
    """Every error message in an answer: request-wide and per statement."""
    found = [answer["error"]] if "error" in answer else []
    return found + [r["error"] for r in answer.get("results", []) if "error" in r]


def names_it(answer, names):
    """Whether the answer is an error and every message in it names `names`."""
    errors = errors_of(answer)
    return bool(errors) and all(names.lower() in e.lower() for e in errors)


def relaxed_errors(answer, names):
    """The one relaxation of error messages: the answer with each message
    that names `names` (case aside) replaced by one marker, so that the rest
    compares exactly and a message naming something else still differs."""
    def mark(message):
        return "<an error naming it>" if names.lower() in message.lower() else message
    marked = copy.deepcopy(answer)
    if "error" in marked:
        marked["error"] = mark(marked["error"])
    for result in marked.get("results", []):
        if "error" in result:
            result["error"] = mark(result["error"])
    return marked


def short(value, limit=1200):
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


@pytest.fixture(scope="module")
def loaded(server, influxd):
    """The dataset in a fresh database of one name on both servers."""
    db = f"iql_{uuid.uuid4().hex[:12]}"
    requests = [(f"/query?{urllib.parse.urlencode({'q': f'CREATE DATABASE {db}'})}", b"")]
    now_s = int(time.time())
    requests += [(f"/write?db={db}&precision={precision}", body.encode())
                 for precision, body in dataset(now_s)]
    for url, headers in [(influxd, {}), (server["url"], {"Authorization": f"Token {TOKEN}"})]:
        for path, data in requests:
            request = urllib.request.Request(url + path, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=30) as r:
                    status, text = r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                status, text = e.code, e.read().decode()
            assert status in (200, 204), f"{url}{path}: {status} {text}"
    return {"db": db, "influxd": influxd, "server": server,
            "recent_in_two_shards": recent_in_two_shards(now_s)}


# InfluxDB's shard groups of the default retention policy are weeks from
# Monday 00:00 UTC (Go's zero time was a Monday).
WEEK = 7 * 86400
GO_EPOCH_MONDAY = 4 * 86400  # 1970-01-05T00:00:00Z, a Monday


def recent_in_two_shards(now_s):
    """Whether `recent`'s points (120 to 10 minutes before `now_s`) lie
    in two of InfluxDB's weekly shards: then InfluxDB's SHOW SERIES
    CARDINALITY counts its series once in each (the documented
    series-cardinality-per-shard difference), from Monday 00:10 to 02:00 UTC."""
    minute = now_s // 60 * 60
    week = lambda t: (t - GO_EPOCH_MONDAY) // WEEK
    return week(minute - 120 * 60) != week(minute - 10 * 60)


def without_recent(answer):
    """A SHOW … CARDINALITY answer without `recent`'s row."""
    answer = copy.deepcopy(answer)
    for result in answer.get("results", []):
        if "series" in result:
            result["series"] = [s for s in result["series"] if s.get("name") != "recent"]
    return answer


@pytest.mark.parametrize("q,params,names", STATEMENTS)
def test_same_as_influxdb(loaded, q, params, names, request):
    ident = request.node.callspec.id
    params = {"db": loaded["db"], **params}
    q = q.replace("$db", loaded["db"])
    theirs = ask(loaded["influxd"], q, params)
    ours = ask(loaded["server"]["url"], q, params, TOKEN)
    report = (f"q={q!r} {params}\n  influxdb {theirs[0]} {short(theirs[1])}\n"
              f"  chingest {ours[0]} {short(ours[1])}")
    if names is None:
        expected, got = theirs[1], ours[1]
    else:
        expected, got = relaxed_errors(theirs[1], names), relaxed_errors(ours[1], names)
    if loaded["recent_in_two_shards"] and re.match(r"SHOW SERIES (EXACT )?CARDINALITY", q):
        # InfluxDB counts recent's series once per shard (see above).
        expected, got = without_recent(expected), without_recent(got)
    equal = theirs[0] == ours[0] and same(in_time_order(expected), in_time_order(got))
    if ident in EXPECTED:
        assert not equal, f"the documented difference {EXPECTED[ident]!r} no longer shows:\n{report}"
        assert names is None or names_it(ours[1], names), \
            f"{EXPECTED[ident]!r}: chingest's errors should name {names!r}:\n{report}"
        return
    if names is None:
        assert not errors_of(theirs[1]), f"InfluxDB answers an error; give names=:\n{report}"
    else:
        assert names_it(theirs[1], names), f"InfluxDB's errors do not name {names!r}:\n{report}"
    assert equal, f"chingest answers differently from InfluxDB 1.6:\n{report}"


def test_credentials_as_parameters(loaded):
    """InfluxDB 1.x clients may send `u` and `p` instead of a header."""
    q, params = "SHOW TAG VALUES FROM cpu WITH KEY = host", {"db": loaded["db"]}
    theirs = ask(loaded["influxd"], q, params)
    assert ask(loaded["server"]["url"], q, {**params, "u": "py", "p": TOKEN}) == theirs
    assert ask(loaded["server"]["url"], q, {**params, "u": "py", "p": "wrong"})[0] == 401


def test_differences_are_documented():
    """docs/influxql.md's table names exactly the differences tested here."""
    documented = set(re.findall(r"^\| `([a-z0-9-]+)` \|", DOC.read_text(), re.MULTILINE))
    assert documented == set(DIFFERENCES), (
        f"documented but not tested: {sorted(documented - set(DIFFERENCES))}; "
        f"tested but not documented: {sorted(set(DIFFERENCES) - documented)}")
    known = {p.id for p in STATEMENTS}
    assert len(known) == len(STATEMENTS), "case ids must be unique"
    known |= {name for name in globals() if name.startswith("test_")}
    for name, cases in DIFFERENCES.items():
        assert cases and set(cases) <= known, f"{name}: unknown cases {set(cases) - known}"


# --------------------------------------------------------------------------
# The Python `influxdb` client against both servers, and against `/sql`.


def make_clients(loaded, **options):
    """The `influxdb` client of each server, on the dataset's database:
    InfluxDB's, then chingest's (the token as password: Basic auth)."""
    def client(url, password):
        port = int(url.rsplit(":", 1)[1])
        return influxdb.InfluxDBClient("127.0.0.1", port, "py", password, loaded["db"],
                                       timeout=30, **options)
    return client(loaded["influxd"], "none"), client(loaded["server"]["url"], TOKEN)


@pytest.fixture(scope="module")
def clients(loaded):
    """The client as it comes: it asks for MessagePack, which InfluxDB
    answers and chingest does not (see DIFFERENCES)."""
    return make_clients(loaded)


def both(clients, call):
    """`call(client)` on each server's client: (InfluxDB's, chingest's)."""
    return tuple(call(c) for c in clients)


def test_client_points_by_tags(clients, loaded):
    theirs, ours = both(clients, lambda c: list(
        c.query("SELECT usage_user, cores FROM cpu GROUP BY host", epoch="ms")
        .get_points(measurement="cpu", tags={"host": "host_2"})))
    assert ours == theirs
    rows = sql(loaded["server"], f"SELECT toUnixTimestamp64Milli(time) AS time, usage_user, cores "
                                 f"FROM {loaded['db']}.cpu WHERE host = 'host_2' ORDER BY time")
    assert ours == [{"time": int(r["time"]), "usage_user": r["usage_user"], "cores": int(r["cores"])}
                    for r in rows]
    assert len(ours) == 30


def test_client_aggregates_by_tag(clients, loaded):
    result = both(clients, lambda c: c.query(
        "SELECT mean(usage_user) AS mean, count(usage_user) AS n FROM cpu GROUP BY host"))
    for host in ["host_1", "host_2", "host_3"]:
        theirs, ours = (list(r.get_points(tags={"host": host})) for r in result)
        assert len(ours) == 1 and ours[0].keys() == theirs[0].keys()
        assert same(ours, theirs), host
        (row,) = sql(loaded["server"], f"SELECT avg(usage_user) AS mean, count(usage_user) AS n "
                                       f"FROM {loaded['db']}.cpu WHERE host = '{host}'")
        assert math.isclose(ours[0]["mean"], row["mean"], rel_tol=1e-9)
        assert ours[0]["n"] == int(row["n"])
    assert list(result[1].get_points(measurement="mem")) == []


def test_client_lists(clients, loaded):
    db = loaded["db"]
    theirs, ours = both(clients, lambda c: c.get_list_measurements())
    assert ours == theirs
    measurements = sql(loaded["server"], f"SELECT DISTINCT measurement FROM {db}._series "
                                         f"ORDER BY measurement")
    assert ours == [{"name": r["measurement"]} for r in measurements]

    for kwargs in [{}, {"measurement": "net"}, {"tags": {"host": "host_1"}},
                   {"measurement": "cpu", "tags": {"region": "us west"}}]:
        theirs, ours = both(clients, lambda c: c.get_list_series(**kwargs))
        assert ours == theirs, kwargs
    series = sql(loaded["server"], f"SELECT measurement, tags FROM {db}._series "
                                   f"WHERE measurement = 'net'")
    keys = sorted("net" + "".join(f",{k}={lp_escape(v, ', =')}" for k, v in sorted(r["tags"].items()))
                  for r in series)
    assert clients[1].get_list_series(measurement="net") == keys

    theirs, ours = both(clients, lambda c: c.get_list_database())
    assert {"name": db} in theirs and {"name": db} in ours
    theirs, ours = both(clients, lambda c: c.get_list_retention_policies(db))
    assert ours == theirs


def in_time_order_points(points):
    """Points of several series in one order: by time, then by their text
    (as `in_time_order` does for answers)."""
    return sorted(points, key=lambda p: (p["time"], json.dumps(p, sort_keys=True)))


def test_client_epoch_and_chunked(clients, loaded):
    q = "SELECT bytes_recv FROM net WHERE host = 'host_2'"
    for epoch in ["ms", "s", "ns"]:
        theirs, ours = both(clients, lambda c: list(c.query(q, epoch=epoch).get_points()))
        assert ours == theirs, epoch
    rows = sql(loaded["server"], f"SELECT toUnixTimestamp(time) AS time, bytes_recv "
                                 f"FROM {loaded['db']}.net WHERE host = 'host_2' ORDER BY time")
    expected = [{"time": int(r["time"]), "bytes_recv": int(r["bytes_recv"])} for r in rows]
    assert list(clients[1].query(q, epoch="s").get_points()) == expected

    def chunked(c):
        return [p for rs in c.query("SELECT * FROM mem GROUP BY host", chunked=True, chunk_size=5)
                for p in rs.get_points()]
    # The client cannot read InfluxDB's chunked MessagePack (msgpack's
    # "unpack(b) received extra data"), so this asks both for JSON.
    theirs, ours = both(make_clients(loaded, headers={"Accept": "application/json"}), chunked)
    assert len(ours) == 24 and in_time_order_points(ours) == in_time_order_points(theirs)
    whole = list(clients[1].query("SELECT * FROM mem GROUP BY host").get_points())
    assert in_time_order_points(ours) == in_time_order_points(whole)


def test_client_several_statements(clients):
    q = "SELECT count(used) FROM mem; SHOW MEASUREMENTS; SELECT * FROM nosuch"
    theirs, ours = both(clients, lambda c: c.query(q))
    assert isinstance(ours, list) and len(ours) == 3
    assert [list(rs.get_points()) for rs in ours] == [list(rs.get_points()) for rs in theirs]
    assert list(ours[0].get_points()) == [{"time": "1970-01-01T00:00:00Z", "count": 24}]


@pytest.mark.parametrize("q,code", [
    ("SELECT foo(usage_user) FROM cpu", None),  # in the result: raised by ResultSet
    ("SELECT mean(usage_user), * FROM cpu", None),
    ("SELECT FROM cpu", 400),  # the request fails
])
def test_client_errors(clients, q, code):
    errors = []
    for client in clients:
        with pytest.raises(influxdb.exceptions.InfluxDBClientError) as raised:
            client.query(q)
        errors.append(raised.value)
    theirs, ours = errors
    assert (ours.code, theirs.code) == (code, code)


def test_msgpack_is_answered_in_json(loaded):
    """A documented difference (`msgpack`): asked for MessagePack, as the
    `influxdb` client asks, InfluxDB answers in it and chingest in JSON with
    the same content; clients go by the Content-Type."""
    answers = []
    for url, headers in [(loaded["influxd"], {}),
                         (loaded["server"]["url"], {"Authorization": f"Token {TOKEN}"})]:
        query = urllib.parse.urlencode({"db": loaded["db"], "q": "SHOW TAG KEYS FROM cpu"})
        request = urllib.request.Request(f"{url}/query?{query}", headers={
            "Accept": "application/x-msgpack", **headers})
        with urllib.request.urlopen(request, timeout=30) as r:
            answers.append((r.headers.get("Content-Type"), r.read()))
    (their_type, theirs), (our_type, ours) = answers
    assert their_type == "application/x-msgpack"
    assert our_type.startswith("application/json"), our_type
    assert json.loads(ours) == msgpack.unpackb(theirs, raw=False)


# --------------------------------------------------------------------------
# The last-value cache: `last()` over all time is answered from memory; with
# a time condition, by the engine. Both must agree through out-of-order
# writes, equal timestamps and deletes.


def test_last_from_the_cache_agrees_with_the_engine(server):
    db = f"lvc_{uuid.uuid4().hex[:12]}"
    url = server["url"]

    def write(body):
        assert post_lines(url, db, body) == 204

    def rows(q, where=""):
        """Each series' tags and rows; a time condition holding every point
        (`where`) sends the statement to the engine. Several selectors
        report the range's start as their time, which the condition moves:
        their rows are compared without it."""
        if where:
            q = q.replace(" GROUP BY", f" {where} GROUP BY") if " GROUP BY" in q else f"{q} {where}"
        status, answer = ask(url, q, {"db": db}, TOKEN)
        assert status == 200 and "error" not in answer["results"][0], answer
        lone = q.count("last(") == 1
        return [(s.get("tags"), [row if lone else row[1:] for row in s["values"]])
                for s in answer["results"][0].get("series", [])]

    def agree(q, condition="WHERE time > 0"):
        cached = rows(q)
        engine = rows(q, condition)
        assert cached == engine, (q, cached, engine)
        return cached

    # Out of order: the point at 10 must not replace the one at 30.
    write('m,host=a v=1,s="x" 30\nm,host=b v=5 20\nm,host=a v=2 10\n')
    assert agree("SELECT last(v) FROM m") == [(None, [["1970-01-01T00:00:00.00000003Z", 1]])]
    agree("SELECT last(v), last(s) FROM m GROUP BY host")
    agree("SELECT last(v) FROM m WHERE host = 'b'", "AND time > 0")
    # A newer point of b, then the newest point deleted: the cache is rebuilt.
    write("m,host=b v=7 40\n")
    assert agree("SELECT last(v) FROM m")[0][1][0][1] == 7
    status, answer = ask(url, "DELETE FROM m WHERE time >= 40", {"db": db, "method": "POST"}, TOKEN)
    assert status == 200 and "error" not in answer["results"][0], answer
    assert [values[0][1] for _, values in agree("SELECT last(v) FROM m GROUP BY host")] == [1, 5]


def test_cardinality_of_every_measurement_is_counted_by_the_engine(server):
    """A hostile cardinality: a /regex/ FROM matching every measurement of
    20,000 series, with every tag key. The engine counts them (one aggregate
    over the series table): each answer has a row per measurement or tag
    set, never one per series, and its counts are what `/sql` reads."""
    db = f"card_{uuid.uuid4().hex[:12]}"
    url = server["url"]
    measurements, per_measurement = 8, 2500
    body = "".join(f"m{m},id={i},host=h{i % 10} v=1i 1\n"
                   for m in range(measurements) for i in range(per_measurement))
    assert post_lines(url, db, body) == 204

    def series(q):
        status, answer = ask(url, q, {"db": db}, TOKEN)
        assert status == 200 and "error" not in answer["results"][0], answer
        return [(s.get("name"), s.get("tags"), s["values"]) for s in answer["results"][0]["series"]]

    names = [f"m{m}" for m in range(measurements)]
    assert series("SHOW SERIES EXACT CARDINALITY FROM /.*/") == \
        [(name, None, [[per_measurement]]) for name in names]
    assert series("SHOW TAG VALUES EXACT CARDINALITY FROM /.*/ WITH KEY =~ /.*/") == \
        [(name, None, [[per_measurement + 10]]) for name in names]
    assert series("SHOW TAG KEY CARDINALITY FROM /.*/") == [(name, None, [[2]]) for name in names]
    assert series("SHOW MEASUREMENT EXACT CARDINALITY FROM /.*/ GROUP BY host") == \
        [(None, {"host": f"h{h}"}, [[measurements]]) for h in range(10)]
    (total,) = sql(server, f"SELECT count() AS n FROM {db}._series FINAL")
    assert int(total["n"]) == measurements * per_measurement
    assert series("SHOW SERIES CARDINALITY") == [(None, None, [[measurements * per_measurement]])]


def post_lines(url, db, body):
    """Writes line protocol (ns) to chingest, visible at once; the status."""
    request = urllib.request.Request(
        f"{url}/write?{urllib.parse.urlencode({'db': db, 'durability': 'visible'})}",
        data=body.encode(), headers={"Authorization": f"Token {TOKEN}"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def explained(loaded, q):
    """The lines of chingest's `EXPLAIN …` answer."""
    status, answer = ask(loaded["server"]["url"], q, {"db": loaded["db"]}, TOKEN)
    assert status == 200, answer
    series = answer["results"][0]["series"][0]
    return series["columns"][0], [row[0] for row in series["values"]]


@pytest.mark.parametrize("q, store, sql", [
    ("SELECT last(used) FROM mem", "last-value cache", False),
    ("SELECT max(value) FROM recent WHERE time > now() - 25m GROUP BY host", "recent samples", False),
    (f"SELECT median(usage_user) FROM cpu WHERE {SPAN} GROUP BY time(10m)", "engine aggregate", True),
    ("SELECT usage_user FROM cpu LIMIT 2", "raw points", True),
    ("SELECT top(usage_user, 2) FROM cpu", "aggregated by chingest", True),
    ("SELECT max(m) FROM (SELECT median(used) AS m FROM mem GROUP BY host)", "subqueries", True),
    ("SELECT mean(usage_user) FROM cpu WHERE host = 'nobody'", "no series selected", False),
])
def test_explain_names_the_store_and_the_sql(loaded, q, store, sql):
    """EXPLAIN plans without reading: the store each measurement is read
    from and the SQL it would be sent (a subquery's inner statements
    first); EXPLAIN ANALYZE answers it, with its rows and times, as the
    statement itself does."""
    column, lines = explained(loaded, "EXPLAIN " + q)
    assert column == "QUERY PLAN"
    stores = [line for line in lines if line.startswith("STORE: ")]
    assert stores and store in stores[-1], lines
    assert any(line.startswith("SQL: SELECT ") for line in lines) == sql, lines
    column, tree = explained(loaded, "EXPLAIN ANALYZE " + q)
    assert column == "EXPLAIN ANALYZE" and tree[:2] == [".", "└── select"], tree
    status, answer = ask(loaded["server"]["url"], q, {"db": loaded["db"]}, TOKEN)
    rows = sum(len(s["values"]) for s in answer["results"][0].get("series", []))
    assert f"    ├── rows: {rows}" in tree, tree
    assert any(store in line for line in tree), tree
    assert any(line.strip(" │├└─").startswith("time: ") for line in tree), tree


def test_explain_reads_nothing_a_bad_statement_is_an_error(loaded):
    status, answer = ask(loaded["server"]["url"], "EXPLAIN SELECT nope(x) FROM cpu",
                         {"db": loaded["db"]}, TOKEN)
    assert status == 200 and "undefined function" in answer["results"][0]["error"], answer
    status, answer = ask(loaded["server"]["url"], "EXPLAIN SHOW MEASUREMENTS",
                         {"db": loaded["db"]}, TOKEN)
    assert status == 400 and "SELECT" in answer["error"], answer


# --------------------------------------------------------------------------
# SELECT … INTO and continuous queries: both servers write, then both are
# read back. Each test has a fresh database of its own (what INTO writes
# must not change the dataset the tests above read).


def post(url, db, q, token=None):
    """(status, answer) of `q` sent by POST to a server, in `db`."""
    return ask(url, q, {"db": db, "method": "POST"}, token)


def fresh_database(loaded, body):
    """A new database of one name on both servers, with a retention
    policy `copies` and `body` (line protocol in seconds) written to it;
    its name."""
    db = f"into_{uuid.uuid4().hex[:12]}"
    for url, token in [(loaded["influxd"], None), (loaded["server"]["url"], TOKEN)]:
        assert post(url, db, f"CREATE DATABASE {db}", token)[0] == 200
        policy = f"CREATE RETENTION POLICY copies ON {db} DURATION INF REPLICATION 1"
        assert post(url, db, policy, token)[0] == 200
        headers = {"Authorization": f"Token {token}"} if token else {}
        request = urllib.request.Request(
            f"{url}/write?db={db}&precision=s&durability=visible", data=body.encode(),
            headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=30) as r:
            assert r.status == 204
    return db


def both_read(loaded, db, q):
    """`q` answered by both servers (InfluxDB's first), in time order."""
    theirs = post(loaded["influxd"], db, q)
    ours = post(loaded["server"]["url"], db, q, TOKEN)
    return in_time_order(theirs[1]), in_time_order(ours[1])


# Each (name, statement, what it writes as FROM reads it). No two rows
# become one point: which of them a server keeps is the order it answers
# them in, which InfluxDB does not promise (see `in_time_order`).
INTO = [
    # Without GROUP BY, tags become fields; with it, tags stay tags.
    ("flat", f"SELECT * INTO flat FROM cpu WHERE host != 'host_3' AND {SPAN}", ["flat"]),
    ("grouped", f"SELECT * INTO grouped FROM cpu WHERE {SPAN} GROUP BY *", ["grouped"]),
    ("aggregates", f"SELECT mean(usage_user) AS mean, max(cores) INTO per5m FROM cpu "
                   f"WHERE {SPAN} GROUP BY time(5m), host", ["per5m"]),
    ("every type", "SELECT * INTO types FROM mem GROUP BY *", ["types"]),
    ("db and rp", "SELECT bytes_recv INTO $db.autogen.received FROM net "
                  "GROUP BY host, interface", ["received"]),
    ("back-reference", f"SELECT mean(*) INTO $db.copies.:MEASUREMENT FROM /^(cpu|net)$/ "
                       f"WHERE {SPAN} GROUP BY time(10m), *", ["copies.cpu", "copies.net"]),
]


@pytest.mark.parametrize("name,q,targets", INTO, ids=[i[0] for i in INTO])
def test_into_writes_as_influxdb(loaded, name, q, targets):
    """The same `INTO` on both servers answers the same count and writes
    the same points, tags and fields, as read back."""
    db = fresh_database(loaded, seconds_body(int(time.time())))
    q = q.replace("$db", db)
    theirs = post(loaded["influxd"], db, q)
    ours = post(loaded["server"]["url"], db, q, TOKEN)
    assert theirs[0] == ours[0] == 200 and not errors_of(theirs[1]), (theirs, ours)
    assert same(theirs[1], ours[1]), f"{q}\n  influxdb {theirs}\n  chingest {ours}"
    for target in targets:
        for read in [f"SELECT * FROM {target} GROUP BY *", f"SHOW TAG KEYS FROM {target}",
                     f"SHOW FIELD KEYS FROM {target}"]:
            expected, got = both_read(loaded, db, read)
            assert same(expected, got), \
                f"{q}\n{read}\n  influxdb {short(expected)}\n  chingest {short(got)}"


def test_into_by_get_warns_as_influxdb(loaded):
    """INTO by GET runs, with InfluxDB's warning to use POST (which quotes
    the statement: documented as `statement-text`)."""
    db = fresh_database(loaded, seconds_body(int(time.time())))
    q = "SELECT * INTO by_get FROM mem GROUP BY *"
    answers = [ask(loaded["influxd"], q, {"db": db}),
               ask(loaded["server"]["url"], q, {"db": db}, TOKEN)]
    texts = []
    for status, answer in answers:
        assert status == 200, answer
        result = answer["results"][0]
        (message,) = result.pop("messages")
        assert message["level"] == "warning" and "please use a POST request" in message["text"]
        texts.append(message["text"])
    assert same(answers[0][1], answers[1][1]), answers
    assert texts[0] != texts[1], "the documented difference no longer shows"
    expected, got = both_read(loaded, db, "SELECT * FROM by_get GROUP BY *")
    assert same(expected, got), (expected, got)


def test_continuous_queries_as_influxdb(loaded):
    """A continuous query every second (and one resampling two), created
    on both servers while points arrive: what they wrote is the same
    interval by interval; SHOW CONTINUOUS QUERIES lists them alike but for
    the statements' text (documented as `statement-text`)."""
    db = fresh_database(loaded, "")
    queries = [
        f"CREATE CONTINUOUS QUERY per_second ON {db} BEGIN SELECT count(v) AS n, max(v) AS top, "
        f"sum(w) INTO per_second FROM m GROUP BY time(1s), host END",
        f"CREATE CONTINUOUS QUERY resampled ON {db} RESAMPLE EVERY 1s FOR 2s BEGIN "
        f"SELECT mean(w) INTO {db}.autogen.resampled FROM m GROUP BY time(1s) END",
    ]
    servers = [(loaded["influxd"], None), (loaded["server"]["url"], TOKEN)]
    for q in queries:
        for url, token in servers:
            status, answer = post(url, db, q, token)
            assert status == 200 and not errors_of(answer), answer
    created = time.time()
    # Points stamped 300 ms ahead: each interval's are all written before
    # the period after it runs, on both.
    last = 0
    for k in range(80):
        at = time.time_ns() + 300_000_000
        body = f"m,host=a v={k}i,w={k * 0.5} {at}\nm,host=b v={2 * k}i,w={k * 0.25} {at}\n"
        for url, token in servers:
            headers = {"Authorization": f"Token {token}"} if token else {}
            request = urllib.request.Request(f"{url}/write?db={db}", data=body.encode(),
                                             headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=30) as r:
                assert r.status == 204
        last = at
        time.sleep(0.1)
    # Until the periods after the last point ran on both (InfluxDB's within
    # its run-interval of 1 s).
    time.sleep(last / 1e9 - time.time() + 3.5)
    start = (int(created) + 3) * 1_000_000_000
    end = last // 1_000_000_000 * 1_000_000_000
    for target in ["per_second", "resampled"]:
        read = f"SELECT * FROM {target} WHERE time >= {start} AND time < {end} GROUP BY *"
        expected, got = both_read(loaded, db, read)
        points = sum(len(s["values"]) for s in expected["results"][0].get("series", []))
        assert points >= 4, f"{target}: InfluxDB wrote too little: {expected}"
        assert same(expected, got), f"{read}\n  influxdb {short(expected)}\n  chingest {short(got)}"
    shown = []
    for url, token in servers:
        status, answer = ask(url, "SHOW CONTINUOUS QUERIES", {}, token)
        assert status == 200, answer
        (series,) = [s for s in answer["results"][0]["series"] if s["name"] == db]
        shown.append(series)
    assert [row[0] for row in shown[0]["values"]] == [row[0] for row in shown[1]["values"]] \
        == ["per_second", "resampled"], shown
    assert shown[1]["values"] == [[name, q] for name, q in zip(["per_second", "resampled"], queries)]
    assert shown[0]["values"] != shown[1]["values"], "the documented difference no longer shows"
    for url, token in servers:
        for name in ["per_second", "resampled"]:
            status, answer = post(url, db, f"DROP CONTINUOUS QUERY {name} ON {db}", token)
            assert status == 200 and not errors_of(answer), answer
        status, answer = ask(url, "SHOW CONTINUOUS QUERIES", {}, token)
        (series,) = [s for s in answer["results"][0]["series"] if s["name"] == db]
        assert "values" not in series, series


def test_points_held_in_memory_are_bounded(tmp_path):
    """A function computed by chingest over the points (top, mode, …) and
    a subquery's answers hold at most query.max_points_in_memory points: a
    statement over more answers an error naming the limit, one within it
    answers, and the server goes on."""
    config = tmp_path / "chingest.toml"
    config.write_text("[query]\nmax_points_in_memory = 50\n")
    proc, where = start_server(tmp_path / "data", "--config", str(config), "--auth-token", TOKEN)
    try:
        url, params = where["url"], {"db": "bounded"}
        assert ask(url, "CREATE DATABASE bounded", {}, TOKEN)[0] == 200
        body = "".join(f"m,host=h{k % 3} v={k}i {T0 + k}\n" for k in range(120)).encode()
        request = urllib.request.Request(f"{url}/write?db=bounded&precision=s", data=body,
                                         headers={"Authorization": f"Token {TOKEN}"})
        assert urllib.request.urlopen(request, timeout=30).status == 204
        within = f"time >= {T0}s AND time < {T0 + 30}s"
        for q in ["SELECT top(v, 2) FROM m", "SELECT mode(v) FROM m GROUP BY host",
                  "SELECT max(v) FROM (SELECT v FROM m)"]:
            status, answer = ask(url, q, params, TOKEN)
            error = answer["results"][0].get("error", "")
            assert status == 200 and "max_points_in_memory" in error, (q, answer)
            bounded = q.replace("FROM m", f"FROM m WHERE {within}")
            status, answer = ask(url, bounded, params, TOKEN)
            assert status == 200 and "series" in answer["results"][0], (bounded, answer)
        assert ask(url, "SELECT count(v) FROM m", params, TOKEN)[1]["results"][0]["series"][0][
            "values"][0][1] == 120
    finally:
        stop_server(proc)
