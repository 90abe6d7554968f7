//! What the fuzz targets (`fuzz/` at the repository's root) reach in the
//! server: compiled only into their builds (`cargo fuzz` passes
//! `--cfg fuzzing`), never into the binary.

use chingest_proto::v1::Point;

/// Converts typed points as `Write` does before handing them to the
/// library: every point is converted or refused, by its 1-based position,
/// each once.
pub fn grpc_points(points: &[Point]) -> Vec<chingest::Point<'_>> {
    let converted = crate::grpc::points::convert(points);
    assert_eq!(converted.points.len(), converted.positions.len());
    let mut positions: Vec<usize> = converted
        .positions
        .iter()
        .copied()
        .chain(converted.rejected.iter().map(|r| r.line))
        .collect();
    positions.sort_unstable();
    assert!(
        positions.iter().copied().eq(1..=points.len()),
        "{positions:?}"
    );
    converted.points
}

/// Reads a ClickHouse HTTP request's query string and headers as `/` does
/// and checks what it made of them; headers that HTTP could not carry are
/// left out.
pub fn clickhouse_request(raw: &str, headers: &[(&[u8], &[u8])]) {
    use axum::http::{HeaderMap, HeaderName, HeaderValue};
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        {
            map.append(name, value);
        }
    }
    crate::http::clickhouse::check_request(raw, &map);
}
