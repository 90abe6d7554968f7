"""A ClickHouse server node for tests: the engine library's own
clickhouse-local main (`chdb_query_cmdline`) with its TCP and HTTP servers
started, held open by a statement that never ends. A test fixture, not
something to ship: it has no interserver port, so replicated tables stay
read-only on it (it can create them, and register them in a Keeper).

Usage: clickhouse_node.py <libchdb.so> <data dir> <tcp port> <http port> [config.xml]
The node serves until this process is killed.
"""

import ctypes
import sys

library, path, tcp_port, http_port = sys.argv[1:5]
config = [f"--config-file={file}" for file in sys.argv[5:6]]
chdb = ctypes.CDLL(library)
# Declared by libchdb (clickhouse-local's main), not by chdb.h.
chdb.chdb_query_cmdline.restype = ctypes.c_void_p
args = [
    "clickhouse",
    f"--path={path}",
    "--listen_host=127.0.0.1",
    f"--tcp_port={tcp_port}",
    f"--http_port={http_port}",
    *config,
    "--multiquery",
    # One row a second, forever: the node serves while it runs.
    "--query=SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; "
    "SELECT count() FROM system.numbers WHERE sleepEachRow(1) = 1 SETTINGS max_block_size = 1",
]
argv = (ctypes.c_char_p * len(args))(*[a.encode() for a in args])
chdb.chdb_query_cmdline(len(args), argv)
