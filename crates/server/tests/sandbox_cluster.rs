//! The hostile-SQL suite of `sandbox.rs` against a server in the
//! `clickhouse` storage mode (`support` starts it so for `*_cluster`
//! targets): its reads go through `Distributed` tables to a ClickHouse
//! node, and must reach no further than in the embedded mode.

#[path = "sandbox.rs"]
mod sandbox;

fn main() {
    sandbox::main();
}
