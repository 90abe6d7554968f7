//! A table's cache as one Arrow batch, the snapshot a statement's
//! `last_values(…)` reads as a table.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray, TimestampNanosecondArray,
    UInt64Array,
};
use arrow::record_batch::RecordBatch;

use crate::last_value::table::{FieldColumn, Status, TableLast, Values, NO_TIME};

impl TableLast {
    /// The whole cache as one batch, for SQL: `series_id`, `time` (the
    /// newest of the series' field times), a column per tag key (empty
    /// where a series lacks it; `<key>_tag` where a field or `series_id`
    /// has the name, as in the measurement's view) and per field (NULL
    /// where the series has no value). `None` unless the cache is whole.
    pub(crate) fn snapshot(&self) -> Option<RecordBatch> {
        let state = self.state.read().unwrap();
        if state.status != Status::Ready || state.untagged != 0 {
            return None;
        }
        let rows: Vec<usize> = (0..state.series.len())
            .filter(|&slot| {
                state.series[slot].tags.is_known()
                    && state.fields.iter().any(|f| f.times[slot] != NO_TIME)
            })
            .collect();
        let tag_keys: BTreeSet<&str> = rows
            .iter()
            .flat_map(|&slot| state.tags.tags(state.series[slot].tags))
            .map(|(key, _)| key)
            .collect();
        let mut columns: Vec<(String, ArrayRef, bool)> = Vec::new();
        let ids = UInt64Array::from_iter_values(rows.iter().map(|&slot| state.series[slot].id));
        columns.push(("series_id".to_owned(), Arc::new(ids), false));
        let times = rows.iter().map(|&slot| {
            state
                .fields
                .iter()
                .map(|f| f.times[slot])
                .max()
                .unwrap_or(NO_TIME)
        });
        let times = TimestampNanosecondArray::from_iter_values(times).with_timezone("UTC");
        columns.push(("time".to_owned(), Arc::new(times), false));
        for key in tag_keys {
            let values = rows
                .iter()
                .map(|&slot| state.tags.value(state.series[slot].tags, key));
            let name = match key == "series_id" || state.field_index.contains_key(key) {
                true => format!("{key}_tag"),
                false => key.to_owned(),
            };
            columns.push((name, Arc::new(StringArray::from_iter_values(values)), false));
        }
        let mut order: Vec<&FieldColumn> = state.fields.iter().collect();
        order.sort_by(|a, b| a.name.cmp(&b.name));
        for field in order {
            let has = |slot: usize| field.times[slot] != NO_TIME;
            let column: ArrayRef = match &field.values {
                Values::Float(v) => Arc::new(Float64Array::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s])),
                )),
                Values::Integer(v) => Arc::new(Int64Array::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s])),
                )),
                Values::UInteger(v) => Arc::new(UInt64Array::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s])),
                )),
                Values::String(v) => Arc::new(StringArray::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s].as_str())),
                )),
                Values::Boolean(v) => Arc::new(BooleanArray::from_iter(
                    rows.iter().map(|&s| has(s).then(|| v[s])),
                )),
            };
            columns.push((field.name.clone(), column, true));
        }
        let batch = RecordBatch::try_from_iter_with_nullable(columns);
        Some(batch.expect("columns of equal length"))
    }
}
