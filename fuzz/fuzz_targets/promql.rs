//! PromQL as `/api/v1/query`, `query_range` and rule files parse it: no
//! panic escapes (the grammar's own are caught: `catching`), no stack
//! overflow at any nesting, and a query that parses
//! prints (Prometheus's canonical layout, `/api/v1/format_query`) as a
//! query that parses to the same tree.

#![no_main]

use chingest_fuzz::{bounded, catching, MIB};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|query: &str| {
    catching(|| {
        bounded(query.len(), 1024, MIB, || {
            let Ok(expr) = chingest_promql::parse_query(query) else {
                return;
            };
            let printed = expr.prettify();
            let again = chingest_promql::parse_query(&printed)
                .unwrap_or_else(|e| panic!("{query:?} printed as {printed:?}, which fails: {e}"));
            assert_eq!(
                again.to_string(),
                expr.to_string(),
                "{query:?} printed as {printed:?}"
            );
        })
    });
});
