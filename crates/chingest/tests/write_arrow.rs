//! Arrow batches written through the library, read back from the engine.

mod support;

use std::sync::Arc;

use chingest::arrow::array::{
    ArrayRef, BooleanArray, DictionaryArray, Float64Array, Int32Array, Int64Array, ListArray,
    ListBuilder, RecordBatch, StringArray, StringBuilder, TimestampMillisecondArray, UInt8Array,
};
use chingest::arrow::datatypes::{Float64Type, Int32Type, UInt32Type};
use chingest::{ArrowTable, Error, Ingestor, Tags};
use support::{ingestor, run, tsv, visible};

test_main!(
    arrow_batches_round_trip_with_nulls_and_casts,
    arrow_and_line_protocol_agree_on_series_ids,
    tags_given_per_series_are_series_ids_like_any_others,
    arrow_batches_that_do_not_fit_are_refused_by_column,
    arrow_arrays_round_trip_and_refuse_scalars,
);

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).unwrap()
}

async fn write(
    ing: &Ingestor,
    db: &str,
    batch: &RecordBatch,
    tags: &[&str],
) -> chingest::Result<usize> {
    ing.write_arrow(db, "autogen", "m", batch, tags, &visible())
        .await
}

fn arrow_batches_round_trip_with_nulls_and_casts() {
    run(async {
        let ing = ingestor().await;
        let hosts: DictionaryArray<Int32Type> =
            vec![Some("a"), Some("b"), None].into_iter().collect();
        let input = batch(vec![
            (
                "time",
                Arc::new(TimestampMillisecondArray::from(vec![1, 2, 3])) as ArrayRef,
            ),
            ("host", Arc::new(hosts)),
            (
                "region",
                Arc::new(StringArray::from(vec![Some("eu"), Some(""), Some("us")])),
            ),
            (
                "f",
                Arc::new(Float64Array::from(vec![Some(1.5), None, Some(-2.0)])),
            ),
            (
                "i",
                Arc::new(Int32Array::from(vec![Some(i32::MIN), Some(7), None])),
            ),
            ("u", Arc::new(UInt8Array::from(vec![255, 0, 1]))),
            (
                "s",
                Arc::new(StringArray::from(vec![None, Some("x"), Some("ü")])),
            ),
            (
                "b",
                Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])),
            ),
        ]);
        assert_eq!(
            write(&ing, "arrow_rt", &input, &["host", "region"])
                .await
                .unwrap(),
            3
        );
        let got = tsv(
            &ing,
            "SELECT toUnixTimestamp64Nano(time), s.tags, f, i, u, f2.s, b \
             FROM arrow_rt.`m.autogen` AS f2 INNER JOIN arrow_rt._series AS s USING series_id ORDER BY time",
        )
        .await;
        assert_eq!(
            got,
            "1000000\t{'host':'a','region':'eu'}\t1.5\t-2147483648\t255\t\\N\ttrue\n\
             2000000\t{'host':'b'}\t\\N\t7\t0\tx\tfalse\n\
             3000000\t{'region':'us'}\t-2\t\\N\t1\tü\t\\N\n"
        );
    })
}

fn arrow_and_line_protocol_agree_on_series_ids() {
    run(async {
        let ing = ingestor().await;
        ing.write_lp(
            "arrow_same",
            "autogen",
            b"m,host=a,region=eu v=1i 1\n",
            &visible(),
        )
        .await
        .unwrap();
        let input = batch(vec![
            ("time", Arc::new(Int64Array::from(vec![2])) as ArrayRef),
            ("region", Arc::new(StringArray::from(vec!["eu"]))),
            ("host", Arc::new(StringArray::from(vec!["a"]))),
            ("v", Arc::new(Int64Array::from(vec![2]))),
        ]);
        write(&ing, "arrow_same", &input, &["region", "host"])
            .await
            .unwrap();
        let got = tsv(
            &ing,
            "SELECT uniqExact(series_id), count() FROM arrow_same.`m.autogen`",
        )
        .await;
        assert_eq!(got, "1\t2\n");
        assert_eq!(
            tsv(&ing, "SELECT count() FROM arrow_same._series").await,
            "1\n"
        );
    })
}

/// Checks that a write was refused as an invalid batch, blaming `column`
/// for a reason that says `reason`.
fn assert_refused(result: chingest::Result<usize>, column: &str, reason: &str) {
    match result {
        Err(Error::InvalidBatch {
            column: got,
            reason: why,
        }) => {
            assert_eq!(got, column, "{why}");
            assert!(why.contains(reason), "{column}: {why:?} lacks {reason:?}");
        }
        other => panic!("{column}: expected InvalidBatch, got {other:?}"),
    }
}

/// Tags given once per series (as remote write and OTLP decode them) name
/// the same series as tag columns and line protocol do, in any order, an
/// empty value being a tag the series lacks; tags that do not fit the
/// batch refuse it whole.
fn tags_given_per_series_are_series_ids_like_any_others() {
    run(async {
        let ing = ingestor().await;
        let db = "arrow_per_series";
        ing.write_lp(db, "autogen", b"m,host=a,region=eu v=1i 1\n", &visible())
            .await
            .unwrap();
        let input = batch(vec![
            (
                "time",
                Arc::new(Int64Array::from(vec![2, 3, 4])) as ArrayRef,
            ),
            ("v", Arc::new(Int64Array::from(vec![2, 3, 4]))),
        ]);
        let write = |tags: &'static [(&'static str, &'static str)],
                     counts: &'static [(usize, usize)]| {
            let table = ArrowTable {
                tags: Tags::Series { tags, counts },
                ..ArrowTable::new("m", &input, &[])
            };
            let ing = &ing;
            async move {
                ing.write_arrow_tables(db, "autogen", &[table], &visible())
                    .await
            }
        };
        let tags = &[("region", "eu"), ("zone", ""), ("host", "a"), ("host", "b")];
        assert_eq!(write(tags, &[(3, 2), (1, 1)]).await.unwrap(), 3);
        assert_eq!(
            tsv(
                &ing,
                &format!(
                    "SELECT s.tags, count() FROM {db}.`m.autogen` AS f \
                     INNER JOIN {db}._series AS s USING series_id GROUP BY s.tags ORDER BY s.tags"
                )
            )
            .await,
            "{'host':'a','region':'eu'}\t3\n{'host':'b'}\t1\n"
        );
        // (tags, counts, the column blamed, what the reason says)
        type Refused = (
            &'static [(&'static str, &'static str)],
            &'static [(usize, usize)],
            &'static str,
            &'static str,
        );
        let refused: [Refused; 5] = [
            (
                &[("host", "a")],
                &[(1, 2)],
                "*",
                "the batch has 1 tags and 3 rows",
            ),
            (&[("host", "a")], &[(2, 3)], "*", "the series give 2 tags"),
            (
                &[("host", "a"), ("host", "b")],
                &[(2, 3)],
                "host",
                "named twice",
            ),
            (
                &[("time", "a")],
                &[(1, 3)],
                "time",
                "both a tag key and a column",
            ),
            (&[("v", "a")], &[(1, 3)], "v", "both a tag key and a column"),
        ];
        for (tags, counts, column, reason) in refused {
            assert_refused(write(tags, counts).await, column, reason);
        }
        assert_eq!(
            tsv(&ing, &format!("SELECT count() FROM {db}.`m.autogen`")).await,
            "4\n"
        );
    })
}

fn arrow_batches_that_do_not_fit_are_refused_by_column() {
    run(async {
        let ing = ingestor().await;
        let time = || Arc::new(Int64Array::from(vec![1])) as ArrayRef;
        let v = || Arc::new(Int64Array::from(vec![1])) as ArrayRef;
        write(
            &ing,
            "arrow_bad",
            &batch(vec![("time", time()), ("v", v())]),
            &[],
        )
        .await
        .unwrap();
        let strings = {
            let mut builder = ListBuilder::new(StringBuilder::new());
            builder.values().append_value("x");
            builder.append(true);
            builder.finish()
        };
        let null_item = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![None])]);
        let cases: Vec<(RecordBatch, Vec<&str>, &str, &str)> = vec![
            (batch(vec![("v", v())]), vec![], "time", "missing"),
            (
                batch(vec![
                    ("time", Arc::new(Int64Array::from(vec![None])) as ArrayRef),
                    ("v", v()),
                ]),
                vec![],
                "time",
                "NULL",
            ),
            (
                batch(vec![
                    ("time", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
                    ("v", v()),
                ]),
                vec![],
                "time",
                "type",
            ),
            (
                batch(vec![("time", time()), ("v", v())]),
                vec!["host"],
                "host",
                "not in the batch",
            ),
            (
                batch(vec![("time", time()), ("v", v())]),
                vec!["v"],
                "v",
                "strings",
            ),
            (
                batch(vec![("time", time()), ("l", Arc::new(strings))]),
                vec![],
                "l",
                "cannot be stored",
            ),
            (
                batch(vec![("time", time()), ("l", Arc::new(null_item))]),
                vec![],
                "l",
                "NULL array items",
            ),
            (
                batch(vec![
                    ("time", time()),
                    ("v", Arc::new(Float64Array::from(vec![1.0]))),
                ]),
                vec![],
                "v",
                "column stores integer",
            ),
            (
                batch(vec![("time", time()), ("series_id", v())]),
                vec![],
                "series_id",
                "reserved",
            ),
            (batch(vec![("time", time())]), vec![], "*", "field"),
        ];
        for (input, tags, column, reason) in cases {
            assert_refused(
                write(&ing, "arrow_bad", &input, &tags).await,
                column,
                reason,
            );
        }
        // Nothing of the refused batches was stored.
        assert_eq!(
            tsv(&ing, "SELECT count() FROM arrow_bad.`m.autogen`").await,
            "1\n"
        );
    })
}

/// Arrays of numbers (histogram buckets, quantiles) are stored as arrays;
/// a row without one stores `[]`, and a line's scalar for an array column
/// is a type conflict for that line.
fn arrow_arrays_round_trip_and_refuse_scalars() {
    run(async {
        let ing = ingestor().await;
        let floats = ListArray::from_iter_primitive::<Float64Type, _, _>(vec![
            Some(vec![Some(0.5), Some(f64::MAX)]),
            None,
        ]);
        let ints = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(-3)]),
            Some(vec![]),
        ]);
        let unsigned = ListArray::from_iter_primitive::<UInt32Type, _, _>(vec![
            Some(vec![Some(u32::MAX), Some(0)]),
            Some(vec![Some(7)]),
        ]);
        let input = batch(vec![
            ("time", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            ("bounds", Arc::new(floats)),
            ("offsets", Arc::new(ints)),
            ("counts", Arc::new(unsigned)),
        ]);
        assert_eq!(write(&ing, "arrow_arrays", &input, &[]).await.unwrap(), 2);
        assert_eq!(
            tsv(
                &ing,
                "SELECT toTypeName(bounds), toTypeName(offsets), toTypeName(counts) \
                 FROM arrow_arrays.`m.autogen` LIMIT 1"
            )
            .await,
            "Array(Float64)\tArray(Int64)\tArray(UInt64)\n"
        );
        assert_eq!(
            tsv(
                &ing,
                "SELECT bounds, offsets, counts FROM arrow_arrays.`m.autogen` ORDER BY time"
            )
            .await,
            "[0.5,1.7976931348623157e308]\t[-3]\t[4294967295,0]\n[]\t[]\t[7]\n"
        );
        let outcome = ing
            .write_lp(
                "arrow_arrays",
                "autogen",
                b"m bounds=1.5 3\nm counts=[1] 4\n",
                &visible(),
            )
            .await
            .unwrap();
        assert_eq!(outcome.accepted, 0);
        assert_eq!(outcome.rejected.len(), 2);
        assert!(
            outcome.rejected[0].reason.contains("float array"),
            "{:?}",
            outcome.rejected[0]
        );
    })
}
