"""The examples of README.md and of the pages that write their own data, run
as a newcomer runs them: each fenced `sh` block of `curl` commands, in
order, against a fresh server per page with the defaults the README
describes (no token), its ports put where the pages say 8086, 8087 and
8123. Each must succeed and print something; where the page shows the
output (an unlabelled block next), the output holds it; where it does not,
the output holds the value the page wrote (12.5), so a read that answers
nothing fails.
"""

import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import ROOT, start_server, stop_server

README = ROOT / "README.md"
# The pages whose examples write the data they read.
PAGES = [README] + [ROOT / "docs" / name for name in ("influxql.md", "writing.md", "downsampling.md")]
# What each page's first example writes, and every later read shows.
WRITTEN = "12.5"


def fenced_blocks(text):
    """The fenced blocks of `text`, in order: (info string, body, what
    follows the block up to the next one)."""
    parts = re.split(r"^```([^\n]*)\n(.*?)^```\n", text, flags=re.M | re.S)
    # [before, info, body, between, info, body, between, …]
    return [(parts[i], parts[i + 1], parts[i + 2]) for i in range(1, len(parts) - 1, 3)]


def runnable(blocks):
    """The `sh` blocks made only of curl commands, each with the output
    the README shows for it: the next block, when it is unlabelled (or
    None)."""
    found = []
    for n, (info, body, between) in enumerate(blocks):
        commands = [line for line in body.splitlines() if line and not line.startswith((" ", "#"))]
        if info.strip() != "sh" or not all(c.startswith("curl ") for c in commands):
            continue
        shown = None
        if n + 1 < len(blocks) and blocks[n + 1][0].strip() == "":
            shown = blocks[n + 1][1]
        found.append((body, shown))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_curl_example_answers_what_it_shows(page):
    examples = runnable(fenced_blocks(page.read_text()))
    # The README's: the write, ClickHouse's interface, InfluxQL and PromQL.
    assert len(examples) >= (4 if page == README else 1), examples
    data_dir = tempfile.mkdtemp(prefix="chingest-readme-")
    proc, where = start_server(data_dir)
    try:
        ports = {"127.0.0.1:8086": f"127.0.0.1:{where['port']}",
                 "localhost:8086": f"127.0.0.1:{where['port']}",
                 "127.0.0.1:8087": where["grpc"],
                 "127.0.0.1:8123": f"127.0.0.1:{where['clickhouse_port']}"}
        for body, shown in examples:
            script = body
            for readme, here in ports.items():
                script = script.replace(readme, here)
            run = subprocess.run(["bash", "-c", "set -e\n" + script], capture_output=True,
                                 text=True, timeout=60)
            assert run.returncode == 0, (body, run.stdout, run.stderr)
            out = run.stdout
            assert out.strip(), f"no answer to:\n{body}"
            if shown is not None:
                # (JSON answers end without a newline: one runs into the next.)
                for line in shown.rstrip().splitlines():
                    assert line.rstrip() in out, f"{body}\nshows {shown!r}\nanswered {out!r}"
            else:
                assert WRITTEN in out, f"{body}\nanswered {out!r}, without {WRITTEN}"
    finally:
        stop_server(proc)
        shutil.rmtree(data_dir, ignore_errors=True)


def test_the_parser_finds_blocks_and_what_they_show():
    text = ("a\n```sh\ncurl x\n```\nprints\n\n```\nout\n```\n```sh\nmake run\n```\n"
            "```sh\ncurl y\n```\nprose\n```rust\nfn f() {}\n```\n")
    assert runnable(fenced_blocks(text)) == [("curl x\n", "out\n"), ("curl y\n", None)]
    assert pathlib.Path(README).exists()
