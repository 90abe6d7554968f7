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
