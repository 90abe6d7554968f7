"""The web UI (ui/) in a real browser: Debian's Chromium, headless, driven
by Playwright, against the real server binary with tokens configured. Each
page's answers are compared with the API they come from; a screenshot of
each page is saved in target/ui-screenshots/ (docs/ui.md shows them).
"""

import json
import pathlib
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from playwright.sync_api import expect, sync_playwright

from conftest import BINARY, ROOT, start_server, stop_server

CHROMIUM = "/usr/bin/chromium"
ADMIN = "ui-admin-secret"
READER = "ui-reader-secret"
SCOPED = "ui-scoped-secret"
DB = "uitest"
SHOTS = ROOT / "target" / "ui-screenshots"
# Known data: 3 hosts, one point a minute for the last 30 minutes.
NOW_S = int(time.time()) // 60 * 60
POINTS = 30
HOSTS = ["h0", "h1", "h2"]
FROM_MS = (NOW_S - POINTS * 60) * 1000
TO_MS = NOW_S * 1000


def request(server, path, params=None, body=None, token=ADMIN):
    """The server's answer to GET (or POST `body`): (status, text)."""
    url = f"{server}{path}?{urllib.parse.urlencode(params or {})}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    req = urllib.request.Request(url, data=body, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def write(server, lines, db=DB):
    status, text = request(server, "/write", {"db": db}, "\n".join(lines).encode())
    assert status == 204, text


# Rules over the known data, evaluated every second: a recording rule, an
# alert firing for h1 and h2, one pending for h2, and a group past its limit.
# They read the last point within a day: the data stays where it was
# written while the suite runs.
RULES = """groups:
- name: cpu
  interval: 1s
  rules:
  - record: host:cpu_usage_user:avg
    expr: avg by (host) (last_over_time(cpu_usage_user[1d]))
  - alert: CpuBusy
    expr: avg by (host) (last_over_time(cpu_usage_user[1d])) > 5
    labels:
      severity: page
    annotations:
      summary: '{{ $labels.host }} busy at {{ $value }}'
  - alert: CpuBurning
    expr: avg by (host) (last_over_time(cpu_usage_user[1d])) > 15
    for: 1h
- name: limited
  interval: 1s
  limit: 1
  rules:
  - record: every:cpu_usage_user
    expr: last_over_time(cpu_usage_user[1d])
"""


@pytest.fixture(scope="module")
def ui():
    """A server with an admin and a read-only token, holding the known data."""
    assert BINARY.exists(), f"build the server first: {BINARY}"
    data_dir = tempfile.mkdtemp(prefix="chingest-ui-")
    config = pathlib.Path(data_dir) / "chingest.toml"
    (pathlib.Path(data_dir) / "rules.yml").write_text(RULES)
    config.write_text(f'auth_tokens = ["{ADMIN}"]\n\n[[tokens]]\ntoken = "{READER}"\nwrite = false\n\n'
                      f'[[tokens]]\ntoken = "{SCOPED}"\ndatabases = ["{DB}"]\n\n'
                      f'[promql]\ndefault_database = "{DB}"\n\n[rules]\nfiles = ["rules.yml"]\n')
    proc, where = start_server(f"{data_dir}/data", "--config", str(config))
    url = where["url"]
    lines = []
    for i in range(POINTS + 1):
        t = (NOW_S - POINTS * 60 + i * 60) * 10**9
        for n, host in enumerate(HOSTS):
            lines.append(f"cpu,host={host},region=r{n % 2} usage_user={10 * n + i % 7}.5,usage_system={i}i {t}")
            lines.append(f"mem,host={host} used={1000 + i * n}i {t}")
    write(url, lines)
    yield url
    stop_server(proc)
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    assert pathlib.Path(CHROMIUM).exists(), "run make test-setup (Debian's chromium)"
    with sync_playwright() as p:
        # Without the background-networking flags Chromium keeps dialling
        # Google's hosts, which a closed network refuses.
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


def open_page(browser, ui, path, token=ADMIN):
    """A new tab at `path` with `token` kept for it (as the token form
    keeps it), failing the test on any script error."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.errors = errors
    if token:
        page.add_init_script(f"sessionStorage.setItem('chingest.token', {json.dumps(token)})")
    page.goto(f"{ui}{path}")
    return page


def shot(page, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)
    assert not page.errors, page.errors


def query_url(lang, q, step=60):
    return "/ui/query?" + urllib.parse.urlencode(
        {"lang": lang, "db": DB, "q": q, "range": "custom", "from": FROM_MS, "to": TO_MS, "step": step})


def finished(page):
    output = page.locator("#query-output")
    expect(output).to_have_attribute("data-state", "done", timeout=20000)
    return output


def table_rows(page):
    return page.locator("#query-table tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{int(ms) % 1000:03d}Z"


def test_promql_chart_has_a_line_per_series_and_the_table_the_api_values(ui, browser):
    page = open_page(browser, ui, query_url("promql", "cpu_usage_user"))
    output = finished(page)
    assert output.get_attribute("data-series") == "3"
    assert page.locator("#query-chart .chart").get_attribute("data-lines") == "3"
    assert page.locator("#query-chart .legend-item").count() == 3
    status, text = request(ui, "/api/v1/query_range", {
        "query": "cpu_usage_user", "db": DB, "start": FROM_MS / 1000, "end": TO_MS / 1000, "step": 60})
    assert status == 200, text
    api = json.loads(text)["data"]["result"]
    expected = [[label_of(s["metric"]), iso(t * 1000), v] for s in api for t, v in s["values"]]
    assert len(expected) == 3 * (POINTS + 1)
    assert table_rows(page) == expected
    # The URL reproduces the view: the same address gives the same table.
    again = open_page(browser, ui, page.url.replace(ui, ""))
    finished(again)
    assert table_rows(again) == expected
    # Hovering shows the values nearest the cursor.
    box = page.locator("#query-chart canvas").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    tip = page.locator(".chart-tip")
    expect(tip).to_be_visible()
    assert "cpu_usage_user{host=" in tip.text_content()
    shot(page, "query-promql")
    # Dragging across the middle half zooms in: a custom range, asked again.
    page.evaluate("() => { document.querySelector('#query-output').dataset.state = 'zooming'; }")
    page.mouse.move(box["x"] + box["width"] * 0.25, box["y"] + 50)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.75, box["y"] + 50, steps=5)
    page.mouse.up()
    finished(page)
    zoomed = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    assert zoomed["range"] == ["custom"]
    assert FROM_MS < int(zoomed["from"][0]) < int(zoomed["to"][0]) < TO_MS
    times = {row[1] for row in table_rows(page)}
    assert times and all(iso(int(zoomed["from"][0]) - 1000) < t < iso(int(zoomed["to"][0]) + 1000) for t in times)


def label_of(metric):
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    return metric.get("__name__", "") + "{" + ", ".join(f"{k}={json.dumps(v)}" for k, v in labels.items()) + "}"


def test_influxql_and_sql_results_match_their_apis(ui, browser):
    q = 'SELECT mean("usage_user") FROM "cpu" WHERE $timeFilter GROUP BY time(5m), "host"'
    page = open_page(browser, ui, query_url("influxql", q))
    output = finished(page)
    assert output.get_attribute("data-series") == "3"
    assert page.locator("#query-chart .chart").get_attribute("data-lines") == "3"
    expanded = q.replace("$timeFilter", f"time >= {FROM_MS}ms AND time <= {TO_MS}ms")
    status, text = request(ui, "/query", {"db": DB, "q": expanded, "epoch": "ms"})
    assert status == 200, text
    series = json.loads(text)["results"][0]["series"]
    expected = [[iso(row[0]), str(row[1])] for s in series for row in s["values"]]
    shown = [row for row in table_rows(page)]
    assert [[t, str(float(v)) if v else "null"] for t, v in shown] == \
        [[t, str(float(v)) if v != "None" else "null"] for t, v in expected]
    shot(page, "query-influxql")

    q = "SELECT time, host, usage_user FROM cpu WHERE $timeFilter ORDER BY time, host"
    page = open_page(browser, ui, query_url("sql", q))
    output = finished(page)
    assert output.get_attribute("data-series") == "3"
    assert output.get_attribute("data-rows") == str(3 * (POINTS + 1))
    status, text = request(ui, "/sql", {"db": DB, "format": "JSONCompact"},
                           q.replace("$timeFilter", f"time >= toDateTime64({FROM_MS / 1000}, 3) AND time <= toDateTime64({TO_MS / 1000}, 3)").encode())
    assert status == 200, text
    assert table_rows(page) == [[str(c) for c in row] for row in json.loads(text)["data"]]
    shot(page, "query-sql")


@pytest.mark.parametrize("lang, q, message, column", [
    ("promql", "rate(cpu_usage_user[5m)", "unexpected", None),
    ("influxql", "SELECT usage_user FORM cpu", "found FORM, expected FROM at line 1, char 19", 19),
    ("sql", "SELEC 1", "failed at position 7", 7),
])
def test_a_bad_query_shows_its_error_and_where(ui, browser, lang, q, message, column):
    page = open_page(browser, ui, query_url(lang, q))
    expect(page.locator("#query-output")).to_have_attribute("data-state", "error", timeout=20000)
    error = page.locator("#query-error")
    assert message in error.text_content()
    if column:
        pointer = error.locator(".error-at").text_content().split("\n")
        assert pointer == [q, " " * (column - 1) + "^"]
    if lang == "sql":
        shot(page, "query-error")


def test_explore_shows_measurements_fields_and_the_cardinality_of_the_api(ui, browser):
    page = open_page(browser, ui, f"/ui/explore?db={DB}")
    expect(page.locator("#measurements li")).to_have_count(2, timeout=20000)
    assert page.locator("#measurements li").evaluate_all(
        "items => items.map(i => i.innerText.replace(/\\s+/g, ' '))") == ["cpu 3", "mem 3"]
    status, text = request(ui, "/api/v1/status/tsdb", {"db": DB, "limit": 10})
    tsdb = json.loads(text)["data"]
    for box, key in [("#top-metrics", "seriesCountByMetricName"), ("#top-labels", "labelValueCountByLabelName"),
                     ("#top-pairs", "seriesCountByLabelValuePair")]:
        shown = page.locator(f"{box} .bar-row").evaluate_all(
            "rows => rows.map(r => [r.querySelector('.bar-name').textContent, Number(r.querySelector('.bar-value').textContent)])")
        assert shown == [[e["name"], e["value"]] for e in tsdb[key]], key
    page.click("#measurements a:text('cpu')")
    expect(page.locator("#fields tbody tr")).to_have_count(2, timeout=20000)
    assert page.locator("#fields tbody tr td:first-child").all_text_contents() == ["usage_system", "usage_user"]
    assert page.locator("#tags tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))") == [["host", "3", "3"], ["region", "2", "3"]]
    expect(page.locator("#last-values tbody tr")).to_have_count(3, timeout=20000)
    assert "explore?db=uitest&m=cpu" in page.url
    shot(page, "explore")


def test_status_moves_while_a_load_runs(ui, browser):
    page = open_page(browser, ui, "/ui/status")
    expect(page.locator("#health-status")).to_have_text("pass", timeout=20000)
    stop = threading.Event()

    def load():
        i = 0
        while not stop.is_set():
            write(ui, [f"load,worker=w{i % 4} v={i}" for i in range(i, i + 200)], db="uiload")
            i += 200
    writer = threading.Thread(target=load)
    writer.start()
    try:
        # Two polls apart: a rate needs two readings.
        rows = page.locator("#tile-rows .tile-value")
        deadline = time.time() + 30
        while float(rows.get_attribute("data-value") or 0) <= 0:
            assert time.time() < deadline, "rows/s never moved"
            time.sleep(0.5)
        # The load's rows, by their protocol.
        cells = page.locator('#protocols tr[data-protocol="line protocol"] td')
        expect(cells.nth(4)).not_to_have_text("0", timeout=10000)
        assert int(page.locator("main").get_attribute("data-polls")) >= 2
        shot(page, "status")
    finally:
        stop.set()
        writer.join()


def test_write_stores_good_lines_and_lists_each_rejected_one(ui, browser):
    page = open_page(browser, ui, "/ui/write")
    page.fill("#write-db", "uiwrite")
    # A file's text is what is sent.
    body = "w,host=a v=1 1000000000\nw,host=a v= 2000000000\nw,host=b v=3 3000000000"
    page.set_input_files("#write-file", files=[{"name": "points.lp", "mimeType": "text/plain", "buffer": body.encode()}])
    expect(page.locator("#write-text")).to_have_value(body)
    page.click("#write-submit")
    result = page.locator("#write-result")
    expect(result).to_have_attribute("data-rejected", "1", timeout=20000)
    assert result.get_attribute("data-accepted") == "2"
    row = page.locator("#write-result tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert len(row) == 1 and row[0][0] == "2" and row[0][3] == "w,host=a v= 2000000000", row
    assert row[0][2], "the reason is shown"
    status, text = request(ui, "/sql", {"db": "uiwrite", "format": "JSONCompact"},
                           b"SELECT count() FROM w")
    assert json.loads(text)["data"] == [[2]], text
    shot(page, "write")


def test_tokens_are_asked_for_and_a_read_only_one_cannot_write(ui, browser):
    page = open_page(browser, ui, "/ui/query", token=None)
    expect(page.locator("#token-input")).to_be_visible(timeout=20000)
    shot(page, "token")
    page.fill("#token-input", "not-a-token")
    page.click(".token-form button")
    expect(page.locator("#token-refused")).to_be_visible(timeout=20000)
    page.fill("#token-input", READER)
    page.click(".token-form button")
    expect(page.locator("#who-scope")).to_have_text("read · every database", timeout=20000)
    # The token is kept for the tab: the next page needs no asking.
    page.click("#nav-write")
    expect(page.locator("#write-result .error")).to_contain_text("read-only", timeout=20000)
    assert page.locator("#write-submit").is_disabled()
    # The server refuses it too, and the page says why.
    page.evaluate("document.querySelector('#write-submit').disabled = false")
    page.fill("#write-db", DB)
    page.fill("#write-text", "w v=1")
    page.click("#write-submit")
    expect(page.locator("#write-result .error")).to_contain_text("HTTP 403", timeout=20000)
    shot(page, "write-refused")
    page.click("#nav-query")
    page.fill("#query-text", "cpu_usage_user")
    page.click("#query-run")
    expect(page.locator("#query-output")).to_have_attribute("data-state", "done", timeout=20000)


def test_the_chart_draws_100_series_of_1000_points(ui, browser):
    lines = [f"wide,s=s{s:03d} v={(s * 7 + i) % 100} {(NOW_S - 1000 + i) * 10**9}"
             for s in range(100) for i in range(1000)]
    for chunk in range(0, len(lines), 20000):
        write(ui, lines[chunk:chunk + 20000], db="uiwide")
    url = "/ui/query?" + urllib.parse.urlencode({
        "lang": "promql", "db": "uiwide", "q": "wide_v", "range": "custom",
        "from": (NOW_S - 999) * 1000, "to": NOW_S * 1000, "step": 1})
    page = open_page(browser, ui, url)
    output = finished(page)
    assert output.get_attribute("data-series") == "100"
    assert output.get_attribute("data-points") == "100000"
    assert page.locator("#query-chart .chart").get_attribute("data-lines") == "100"
    # The time it took is measured by tests/python/bench_ui.py, not asserted.
    print(f"100 x 1000: answered in {output.get_attribute('data-fetch-ms')} ms, "
          f"drawn in {output.get_attribute('data-draw-ms')} ms")


def test_assets_are_embedded_and_revalidated(ui):
    with urllib.request.urlopen(f"{ui}/ui/assets/js/app.js") as r:
        etag = r.headers["ETag"]
        assert r.headers["Content-Type"].startswith("text/javascript")
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    req = urllib.request.Request(f"{ui}/ui/assets/js/app.js", headers={"If-None-Match": etag})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 304
    for missing in ["/ui/assets/../Cargo.toml", "/ui/assets/nothing.js", "/ui/nothing"]:
        assert request(ui, missing, token=None)[0] == 404, missing
    assert request(ui, "/api/v1/access", token=None)[0] == 401
    assert json.loads(request(ui, "/api/v1/access", token=READER)[1]) == {
        "auth": True, "read": True, "write": False, "admin": False, "databases": None,
        "promqlDatabase": DB}


def test_markup_in_the_data_is_shown_as_text(ui, browser):
    # A tag value, a measurement and a field named as markup that would run
    # a script if a page inserted it as HTML.
    evil = '<img src=x onerror="window.pwned=1">'
    escaped = evil.replace(" ", "\\ ").replace("=", "\\=").replace(",", "\\,")
    write(ui, [f"xss,host={escaped} v=1", f"{escaped},host=a v=2"], db="uixss")
    page = open_page(browser, ui, "/ui/explore?db=uixss&m=xss")
    expect(page.locator("#tags tbody tr")).to_have_count(1, timeout=20000)
    expect(page.locator("#measurements")).to_contain_text(evil)
    expect(page.locator("#last-values")).to_contain_text(evil)
    page = open_page(browser, ui, "/ui/query?" + urllib.parse.urlencode(
        {"lang": "sql", "db": "uixss", "q": "SELECT tags['host'] FROM _series ORDER BY 1", "range": "1h"}))
    finished(page)
    expect(page.locator("#query-table")).to_contain_text(evil)
    assert page.evaluate("() => window.pwned") is None
    assert page.locator("#main img").count() == 0


def test_a_token_of_one_database_sees_only_it(ui, browser):
    write(ui, ["other v=1"], db="uiother")
    page = open_page(browser, ui, "/ui/explore", token=SCOPED)
    expect(page.locator("#who-scope")).to_have_text(f"read, write · databases {DB}", timeout=20000)
    expect(page.locator("#databases li")).to_have_text([DB], timeout=20000)
    expect(page.locator("#measurements li")).to_have_count(2, timeout=20000)
    page = open_page(browser, ui, "/ui/query?" + urllib.parse.urlencode(
        {"lang": "sql", "q": "SELECT count() FROM uiother.other", "range": "1h"}), token=SCOPED)
    expect(page.locator("#query-output")).to_have_attribute("data-state", "error", timeout=20000)
    expect(page.locator("#query-status")).to_have_text("HTTP 403")


def test_alerts_show_the_rules_and_alerts_of_the_api(ui, browser):
    """The Alerts page lists what /api/v1/alerts and /api/v1/rules answer:
    the firing and pending alerts with their labels and annotations, every
    group and rule with its health, a failing rule's error, and each
    expression as a link to the Query page over the rules' database."""
    def api(path):
        status, text = request(ui, path)
        assert status == 200, text
        return json.loads(text)["data"]
    deadline = time.time() + 20
    while len(api("/api/v1/alerts")["alerts"]) < 3:
        assert time.time() < deadline, api("/api/v1/alerts")
        time.sleep(0.2)
    page = open_page(browser, ui, "/ui/alerts")
    expect(page.locator("#alerts-active tbody tr")).to_have_count(3, timeout=20000)
    alerts = api("/api/v1/alerts")["alerts"]
    firing = [a for a in alerts if a["state"] == "firing"]
    expect(page.locator("#alerts-firing")).to_have_text(f"{len(firing)} firing")
    expect(page.locator("#alerts-pending")).to_have_text(f"{len(alerts) - len(firing)} pending")
    rows = page.locator("#alerts-active tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert sorted((r[0], r[1]) for r in rows) == sorted((a["labels"]["alertname"], a["state"]) for a in alerts)
    h1 = next(r for r in rows if r[0] == "CpuBusy" and 'host="h1"' in r[2])
    assert 'severity="page"' in h1[2] and "summary: h1 busy at" in h1[3], h1
    groups = api("/api/v1/rules")["groups"]
    for group in groups:
        section = page.locator(f'section.rule-group[data-group="{group["name"]}"]')
        expect(section).to_have_count(1)
        for rule in group["rules"]:
            row = section.locator(f'tr[data-rule="{rule["name"]}"]')
            expect(row).to_have_attribute("data-health", rule["health"])
            link = row.locator("a.rule-query")
            expect(link).to_have_text(rule["query"])
            href = link.get_attribute("href")
            assert urllib.parse.parse_qs(urllib.parse.urlparse(href).query) == {
                "lang": ["promql"], "q": [rule["query"]], "db": [DB]}, href
    limited = page.locator('section.rule-group[data-group="limited"]')
    expect(limited.locator(".error")).to_have_text("exceeded limit of 1 with 3 series")
    # The link opens the Query page on the rule's expression.
    page.locator('tr[data-rule="host:cpu_usage_user:avg"] a.rule-query').click()
    expect(page.locator("#query-text")).to_have_value("avg by (host) (last_over_time(cpu_usage_user[1d]))")
    page.goto(f"{ui}/ui/alerts")
    expect(page.locator("#alerts-active tbody tr")).to_have_count(3, timeout=20000)
    shot(page, "alerts")
