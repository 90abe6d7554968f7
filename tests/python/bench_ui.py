"""Measures the web UI in headless Chromium against the real server
(docs/benchmarks.md §17):

1. the Query page asked for 100 series × 1,000 points of PromQL: the answer's
   time (request, JSON, series built) and the chart's (drawn, table built),
   then a redraw as the cursor moves, each the median of --runs;
2. the server's CPU while the Status page polls it, against the same
   server idle, over --seconds each.

    python3 tests/python/bench_ui.py [--binary target/release/chingest] [--runs 10] [--seconds 60]
"""

import argparse
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from conftest import ROOT, start_server, stop_server  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from test_ui import CHROMIUM  # noqa: E402

POLL_MS = 5000  # ui/js/status.js's POLL_MS

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def cpu_seconds(pid):
    """User plus system CPU time of `pid` so far."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(pid, seconds):
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return 100 * (cpu_seconds(pid) - before) / seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=str(ROOT / "target" / "release" / "chingest"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="chingest-ui-bench-")
    proc, where = start_server(data_dir, binary=args.binary)
    url = where["url"]
    try:
        now = int(time.time())
        lines = [f"wide,s=s{s:03d} v={(s * 7 + i) % 100} {(now - 1000 + i) * 10**9}"
                 for s in range(100) for i in range(1000)]
        for chunk in range(0, len(lines), 20000):
            body = "\n".join(lines[chunk:chunk + 20000]).encode()
            urllib.request.urlopen(urllib.request.Request(f"{url}/write?db=bench", data=body)).read()
        query = "/ui/query?" + urllib.parse.urlencode({
            "lang": "promql", "db": "bench", "q": "wide_v", "range": "custom",
            "from": (now - 999) * 1000, "to": now * 1000, "step": 1})
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url + query)
            output = page.locator("#query-output")
            fetch, draw, redraw = [], [], []
            for run in range(args.runs + 1):
                if run:
                    page.click("#query-run")
                page.wait_for_selector("#query-output[data-state=done]", timeout=60000)
                assert output.get_attribute("data-points") == "100000"
                if run:  # the first warms the server's caches and the page's code
                    fetch.append(float(output.get_attribute("data-fetch-ms")))
                    draw.append(float(output.get_attribute("data-draw-ms")))
                    box = page.locator("#query-chart canvas").bounding_box()
                    page.mouse.move(box["x"] + box["width"] * (0.2 + run / 40), box["y"] + box["height"] / 2)
                    redraw.append(float(page.locator("#query-chart .chart").get_attribute("data-draw-ms")))
                page.evaluate("() => { document.querySelector('#query-output').dataset.state = 'again'; }")
            api = []
            for _ in range(args.runs):
                started = time.perf_counter()
                urllib.request.urlopen(url + "/api/v1/query_range?" + urllib.parse.urlencode({
                    "query": "wide_v", "db": "bench", "start": now - 999, "end": now, "step": 1})).read()
                api.append(1000 * (time.perf_counter() - started))
            print(f"100 series x 1000 points, median of {args.runs}: answered {statistics.median(fetch):.0f} ms "
                  f"(the API alone, from Python: {statistics.median(api):.0f} ms), "
                  f"drawn with its legend and table {statistics.median(draw):.0f} ms, "
                  f"the chart redrawn under the cursor {statistics.median(redraw):.1f} ms")
            page.close()
            idle = server_cpu(proc.pid, args.seconds)
            status = browser.new_page()
            status.goto(f"{url}/ui/status")
            status.wait_for_selector("#health-status", timeout=30000)
            polled = server_cpu(proc.pid, args.seconds)
            polls = int(status.locator("main").get_attribute("data-polls"))
            browser.close()
        print(f"server CPU over {args.seconds:.0f} s: idle {idle:.2f}% of a core, "
              f"with the Status page open {polled:.2f}% ({polls} polls): the page costs {polled - idle:.2f}%")
        # The same cost counted directly: many polls back to back.
        before = cpu_seconds(proc.pid)
        for _ in range(200):
            for path in ("/metrics", "/health"):
                urllib.request.urlopen(url + path).read()
        per_poll = (cpu_seconds(proc.pid) - before) / 200
        print(f"one poll (/metrics and /health) costs the server {1000 * per_poll:.2f} ms of CPU: "
              f"{100 * per_poll / (POLL_MS / 1000):.3f}% of a core at one poll every {POLL_MS / 1000:.0f} s")
    finally:
        stop_server(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
