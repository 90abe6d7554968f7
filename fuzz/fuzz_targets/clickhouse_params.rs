//! The ClickHouse HTTP interface's URL parameters and headers, as `/`
//! reads them before anything else: the first line is the query string,
//! each further line a header (`name: value`). No panic; every parameter
//! is the interface's own or a setting the engine is asked about; one way
//! of credentials (`check_request` in the server says what is checked).

#![no_main]

use chingest_fuzz::{bounded, MIB};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    bounded(input.len(), 64, MIB, || {
        let mut lines = input.split(|&b| b == b'\n');
        let Some(Ok(raw)) = lines.next().map(std::str::from_utf8) else {
            return;
        };
        let headers: Vec<(&[u8], &[u8])> = lines
            .filter_map(|line| {
                let colon = line.iter().position(|&b| b == b':')?;
                let value = &line[colon + 1..];
                Some((&line[..colon], value.strip_prefix(b" ").unwrap_or(value)))
            })
            .collect();
        chingest_server::fuzzing::clickhouse_request(raw, &headers);
    });
});
