//! How one table's cache answers, once whole: the series tag matchers
//! select (by field and time range), tag values and keys, recent samples
//! and the newest values.

use crate::config::DuplicatePolicy;
use crate::last_value::answers::{IndexedSeries, LastSeries, LastValue, RecentSamples};
use crate::last_value::postings::{Among, TagMatcher, TagsAt};
use crate::last_value::recent::Taken;
use crate::last_value::table::{
    FieldColumn, State, Status, TableLast, NO_FIRST, NO_RECENT, NO_TIME,
};
use crate::parallel;

/// Series whose recent samples are worth decoding on a core of their own
/// (`parallel::map`): a range read of a few series stays on its thread.
const SERIES_PER_TASK: usize = 32;

impl State {
    /// The slots (sorted) of the tagged series the matchers select that
    /// have a value of `field` (any field when `None`), in `range` (ns, by
    /// their first and newest times) when given.
    fn selected(
        &self,
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Vec<u32> {
        let Some(has_rows) = self.has_rows(field, range) else {
            return Vec::new();
        };
        let mut slots = self
            .tags
            .select(self.series.len() as u32, matchers, |slot| {
                self.tags_of(slot)
            });
        slots.retain(|&slot| has_rows(slot));
        slots
    }

    /// Where the tags of the series in `slot` are.
    fn tags_of(&self, slot: u32) -> TagsAt {
        self.series[slot as usize].tags
    }

    /// Calls `list` with the series the matchers select, as
    /// [`selected`](Self::selected) says, and how to find their tags:
    /// without matchers as a test (each value's postings read until a
    /// series passes), without any condition as every series.
    fn among<T>(
        &self,
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
        list: impl FnOnce(Among<'_>, &dyn Fn(u32) -> TagsAt) -> T,
    ) -> T {
        let tags_of = |slot: u32| self.tags_of(slot);
        if matchers.is_empty() && field.is_none() && range.is_none() {
            return list(Among::Every, &tags_of);
        }
        if matchers.is_empty() {
            return match self.has_rows(field, range) {
                Some(has_rows) => list(Among::Kept(&has_rows), &tags_of),
                None => list(Among::Slots(&[]), &tags_of),
            };
        }
        list(
            Among::Slots(&self.selected(matchers, field, range)),
            &tags_of,
        )
    }

    /// Whether the series in a slot is tagged and has a value of `field`
    /// (any field when `None`) in `range` (ns) when given — with neither,
    /// whether it is tagged (a series of the series table, rows or not);
    /// `None` when the table has no such field.
    fn has_rows(
        &self,
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<impl Fn(u32) -> bool + '_> {
        let columns: Vec<&FieldColumn> = match field {
            Some(field) => vec![&self.fields[*self.field_index.get(field)?]],
            None => self.fields.iter().collect(),
        };
        let any_rows = field.is_none() && range.is_none();
        Some(move |slot: u32| {
            let slot = slot as usize;
            self.series[slot].tags.is_known()
                && (any_rows
                    || columns.iter().any(|column| {
                        let (first, last) = (column.firsts[slot], column.times[slot]);
                        first != NO_FIRST
                            && !range.is_some_and(|(start, end)| first > end || last < start)
                    }))
        })
    }

    /// The tagged series the matchers select that have a value of field
    /// `field` in `range` (ns, by their first and newest times), by slot.
    fn select(
        &self,
        matchers: &[TagMatcher<'_>],
        field: &str,
        range: Option<(i64, i64)>,
    ) -> Vec<IndexedSeries> {
        let Some(&f) = self.field_index.get(field) else {
            return Vec::new();
        };
        let column = &self.fields[f];
        self.selected(matchers, Some(field), range)
            .into_iter()
            .map(|slot| {
                let slot = slot as usize;
                IndexedSeries {
                    series_id: self.series[slot].id,
                    tags: self.tags.owned_tags(self.series[slot].tags),
                    first_ns: column.firsts[slot],
                    last_ns: column.times[slot],
                }
            })
            .collect()
    }

    /// The series `keep` accepts that have a value, fields sorted by name.
    pub(super) fn read(&self, mut keep: impl FnMut(&[(&str, &str)]) -> bool) -> Vec<LastSeries> {
        let mut order: Vec<usize> = (0..self.fields.len()).collect();
        order.sort_by(|&a, &b| self.fields[a].name.cmp(&self.fields[b].name));
        let mut found = Vec::new();
        let mut tags: Vec<(&str, &str)> = Vec::new();
        for (slot, series) in self.series.iter().enumerate() {
            if !series.tags.is_known() {
                continue;
            }
            tags.clear();
            tags.extend(self.tags.tags(series.tags));
            if !keep(&tags) {
                continue;
            }
            let fields: Vec<(String, LastValue)> = order
                .iter()
                .map(|&i| &self.fields[i])
                .filter(|field| field.times[slot] != NO_TIME)
                .map(|field| {
                    let value = LastValue {
                        time_ns: field.times[slot],
                        value: field.values.get(slot),
                    };
                    (field.name.clone(), value)
                })
                .collect();
            if !fields.is_empty() {
                found.push(LastSeries {
                    series_id: series.id,
                    tags: self.tags.owned_tags(series.tags),
                    fields,
                });
            }
        }
        found
    }
}

impl TableLast {
    /// The whole cache, read-locked, if it answers.
    fn ready(&self) -> Option<std::sync::RwLockReadGuard<'_, State>> {
        if self.status() != Status::Ready {
            return None;
        }
        let state = self.state.read().unwrap();
        (state.status == Status::Ready && state.untagged == 0).then_some(state)
    }

    /// The series whose tags the matchers accept and that have a value of
    /// `field` in `range` (ns: between their first and newest value), in
    /// no particular order; `None` unless the cache is whole.
    pub(crate) fn select(
        &self,
        matchers: &[TagMatcher<'_>],
        field: &str,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<IndexedSeries>> {
        Some(self.ready()?.select(matchers, field, range))
    }

    /// The values of tag `key` among the series the matchers accept
    /// (every series of the table when there are none) that have a value
    /// of `field` if given, in `range` (ns) if given; sorted; `None`
    /// unless the cache is whole.
    pub(crate) fn tag_values(
        &self,
        key: &str,
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let state = self.ready()?;
        Some(state.among(matchers, field, range, |among, tags_of| {
            state.tags.values(key, among, tags_of)
        }))
    }

    /// The tag keys of the series the matchers accept, as
    /// [`tag_values`](Self::tag_values) selects them; sorted; `None`
    /// unless the cache is whole.
    pub(crate) fn tag_keys(
        &self,
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let state = self.ready()?;
        Some(state.among(matchers, field, range, |among, tags_of| {
            state.tags.keys(among, tags_of)
        }))
    }

    /// Each of `ids`' samples of numeric field `field` in `[from, end]`
    /// (ns), in `ids`' order (none for a series or field the table does
    /// not have), where `from` is `start` or, when the cache does not hold
    /// every sample from there on, the time from which it does; `None`
    /// unless the cache is whole and holds every sample of some part of
    /// the range. Times are told in units of `per` ns (1: ns), floored,
    /// the last sample of equal times kept.
    pub(crate) fn recent<S: Taken>(
        &self,
        field: &str,
        ids: &[u64],
        (start, end): (i64, i64),
        per: i64,
        duplicates: DuplicatePolicy,
    ) -> Option<RecentSamples<S>> {
        let state = self.ready()?;
        let from = start.max(state.recent_from);
        if from > end || state.recent_from == NO_RECENT {
            return None;
        }
        let column = state.field_index.get(field).map(|&f| &state.fields[f]);
        let recent = column.and_then(|column| column.recent.as_ref());
        let one_row_each = duplicates == DuplicatePolicy::Last
            || column.is_none_or(|column| column.repeated < from);
        let samples = parallel::map(ids.iter().collect(), SERIES_PER_TASK, |id| {
            let slot = state.index.get(id);
            match (recent, slot) {
                (Some(recent), Some(&slot)) => S::taken(&recent[slot as usize], from, end, per),
                _ => S::default(),
            }
        });
        Some(RecentSamples {
            from_ns: from,
            samples,
            one_row_each,
        })
    }

    /// The cached series `keep` accepts; `None` unless the cache is whole.
    pub(crate) fn read(
        &self,
        keep: impl FnMut(&[(&str, &str)]) -> bool,
    ) -> Option<Vec<LastSeries>> {
        Some(self.ready()?.read(keep))
    }
}
