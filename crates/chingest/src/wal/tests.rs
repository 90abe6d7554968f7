//! The log's format and files, without the engine.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Float64Array, TimestampNanosecondArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;

use super::*;
use crate::layout::schema::time_type;
use crate::layout::series::SeriesKey;

fn chunk(rows: u64) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("time", time_type(), false),
        Field::new("series_id", DataType::UInt64, false),
        Field::new("usage", DataType::Float64, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(
                TimestampNanosecondArray::from_iter_values(0..rows as i64).with_timezone("UTC"),
            ),
            Arc::new(UInt64Array::from_iter_values(0..rows)),
            Arc::new(Float64Array::from_iter(
                (0..rows).map(|i| (i % 2 == 0).then_some(i as f64 / 2.0)),
            )),
        ],
    )
    .unwrap()
}

fn series() -> Vec<(u64, SeriesKey)> {
    let key = SeriesKey {
        measurement: "cpu".to_owned(),
        tags: vec![("host".to_owned(), "a".to_owned())],
    };
    vec![(key.series_id(), key)]
}

fn range(first: Lsn, last: Lsn) -> FlushRange {
    FlushRange {
        table: TableRef {
            database: "db".to_owned(),
            retention_policy: "autogen".to_owned(),
            measurement: "cpu".to_owned(),
        },
        first,
        last,
    }
}

/// Frames of a write (lsn 1, two chunks), a started (2) and a committed (3)
/// flush marker.
fn three_frames() -> Vec<u8> {
    let mut out = Vec::new();
    let chunks = [chunk(3), chunk(2)];
    encode_write(
        &mut out,
        1,
        "db",
        "autogen",
        &series(),
        [("cpu", &chunks[..])].into_iter(),
    )
    .unwrap();
    encode_flush(&mut out, 2, &range(1, 1), false).unwrap();
    encode_flush(&mut out, 3, &range(1, 1), true).unwrap();
    out
}

/// Writes `frames` as the one segment of a log in `dir`.
fn write_segment(dir: &Path, frames: &[u8]) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(format!("{:020}.wal", 1));
    let mut bytes = segment::SEGMENT_MAGIC.to_vec();
    bytes.extend_from_slice(frames);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Opens the log in `dir`, returning its records and what was cut.
fn open(dir: &Path) -> (Vec<(Lsn, Record)>, Opened, LogFiles) {
    let mut records = Vec::new();
    let (files, opened) =
        LogFiles::open(dir, 1 << 20, |lsn, record| records.push((lsn, record))).expect("log opens");
    (records, opened, files)
}

#[test]
fn records_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    write_segment(dir.path(), &three_frames());
    let (records, opened, files) = open(dir.path());
    assert!(opened.cuts.is_empty());
    assert_eq!(files.next_lsn(), 4);
    let lsns: Vec<_> = records.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(lsns, [1, 2, 3]);
    let Record::Write(write) = &records[0].1 else {
        panic!("{:?}", records[0].1)
    };
    assert_eq!(
        (write.database.as_str(), write.retention_policy.as_str()),
        ("db", "autogen")
    );
    assert_eq!(write.series, series());
    assert_eq!(write.tables.len(), 1);
    assert_eq!(write.tables[0].batches().unwrap(), vec![chunk(3), chunk(2)]);
    assert_eq!(records[1].1, Record::FlushStarted(range(1, 1)));
    assert_eq!(records[2].1, Record::FlushCommitted(range(1, 1)));
}

/// The frame format is a storage format: these bytes must keep decoding to
/// these records. (Regenerate only with a new segment format version.)
#[test]
fn format_matches_golden_bytes() {
    if std::env::var_os("CHINGEST_BLESS_GOLDEN").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/wal/golden_frames.bin");
        std::fs::write(path, three_frames()).unwrap();
        return;
    }
    let golden = include_bytes!("golden_frames.bin");
    assert_eq!(
        three_frames(),
        golden.as_slice(),
        "the log's encoding changed: that is a storage format change"
    );
    let dir = tempfile::tempdir().unwrap();
    write_segment(dir.path(), golden);
    let (records, _, _) = open(dir.path());
    assert_eq!(records.len(), 3);
}

#[test]
fn a_torn_tail_at_every_offset_is_cut_and_the_whole_records_replayed() {
    let frames = three_frames();
    // Where the last frame starts: the first two frames alone.
    let mut two = Vec::new();
    let chunks = [chunk(3), chunk(2)];
    encode_write(
        &mut two,
        1,
        "db",
        "autogen",
        &series(),
        [("cpu", &chunks[..])].into_iter(),
    )
    .unwrap();
    encode_flush(&mut two, 2, &range(1, 1), false).unwrap();
    let last_start = two.len();
    let header = segment::SEGMENT_MAGIC.len() as u64;
    for cut in last_start..frames.len() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_segment(dir.path(), &frames[..cut]);
        let (records, opened, files) = open(dir.path());
        assert_eq!(records.len(), 2, "cut at {cut}");
        if cut > last_start {
            assert_eq!(opened.cuts.len(), 1, "cut at {cut}");
            assert_eq!(opened.cuts[0].offset, header + last_start as u64);
        }
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            header + last_start as u64,
            "the torn tail is cut off"
        );
        // Numbering continues after the last whole record.
        assert_eq!(files.next_lsn(), 3, "cut at {cut}");
    }
}

#[test]
fn a_corrupt_frame_is_cut_with_what_follows() {
    let mut frames = three_frames();
    let flip = frames.len() - 3;
    frames[flip] ^= 0x40;
    let dir = tempfile::tempdir().unwrap();
    write_segment(dir.path(), &frames);
    let (records, opened, _) = open(dir.path());
    assert_eq!(records.len(), 2);
    assert_eq!(opened.cuts[0].reason, "checksum mismatch");
}

#[test]
fn a_frame_that_passes_its_checksum_but_does_not_decode_stops_the_open() {
    let mut frames = three_frames();
    // A fourth frame of an unknown kind, correctly checksummed.
    let frame = record::FrameWriter::begin(&mut frames, 99, 4);
    frame.end().unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_segment(dir.path(), &frames);
    let err = LogFiles::open(dir.path(), 1 << 20, |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("unknown record kind 99"), "{err}");
}

#[test]
fn a_foreign_file_is_refused_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(format!("{:020}.wal", 1)),
        b"not a log segment",
    )
    .unwrap();
    let err = LogFiles::open(dir.path(), 1 << 20, |_, _| {}).unwrap_err();
    assert!(matches!(err, ReadError::Header { .. }), "{err}");
}

#[test]
fn segments_roll_and_the_checkpoint_deletes_the_ones_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_, opened, mut files) = open(dir.path());
    assert_eq!(opened.checkpoint.committed, 0);
    let log_id = files.log_id();
    // Each frame is ~2 KiB: a 4 KiB segment holds one or two.
    for _ in 0..10 {
        let lsn = files.take_lsn();
        let mut frame = Vec::new();
        let chunks = [chunk(100)];
        encode_write(
            &mut frame,
            lsn,
            "db",
            "rp",
            &[] as &[(u64, SeriesKey)],
            [("m", &chunks[..])].into_iter(),
        )
        .unwrap();
        files.segment_bytes = 4096;
        files.append(lsn, &frame).unwrap();
    }
    files.sync().unwrap();
    let before = files.segment_count();
    assert!(before >= 5, "{before} segments");
    files.checkpoint(6).unwrap();
    let after = list(dir.path()).unwrap();
    assert!(
        after.len() < before,
        "segments below the checkpoint are deleted"
    );
    assert!(
        after.windows(2).all(|w| w[0].first_lsn < w[1].first_lsn),
        "{after:?}"
    );
    // Every record above the checkpoint is still there, and nothing below
    // it is replayed.
    drop(files);
    let (records, opened, files) = open(dir.path());
    assert_eq!(
        opened.checkpoint,
        Checkpoint {
            log_id,
            committed: 6
        }
    );
    let lsns: Vec<_> = records.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(lsns, [7, 8, 9, 10]);
    assert_eq!(files.next_lsn(), 11);
}

#[test]
fn numbering_survives_a_log_emptied_by_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, mut files) = open(dir.path());
    for _ in 0..3 {
        let lsn = files.take_lsn();
        let mut frame = Vec::new();
        encode_flush(&mut frame, lsn, &range(1, 1), true).unwrap();
        files.append(lsn, &frame).unwrap();
    }
    files.checkpoint(3).unwrap();
    drop(files);
    let (records, _, files) = open(dir.path());
    assert!(records.is_empty());
    assert_eq!(
        files.next_lsn(),
        4,
        "lsns are never reused: they name inserts"
    );
}

#[test]
fn a_group_cut_back_after_a_failed_sync_is_not_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, mut files) = open(dir.path());
    let append = |files: &mut LogFiles| {
        let lsn = files.take_lsn();
        let mut frame = Vec::new();
        encode_flush(&mut frame, lsn, &range(1, 1), true).unwrap();
        files.append(lsn, &frame).unwrap();
        frame.len() as u64
    };
    append(&mut files);
    files.sync().unwrap();
    // The appender cuts a group off when its sync fails.
    let failed = append(&mut files);
    files.cut_back(failed).unwrap();
    append(&mut files);
    files.sync().unwrap();
    drop(files);
    let (records, opened, _) = open(dir.path());
    assert!(opened.cuts.is_empty(), "nothing torn is left behind");
    let lsns: Vec<_> = records.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(lsns, [1, 3]);
}
