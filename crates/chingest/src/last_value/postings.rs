//! A table's inverted index of tags: tag key → value → the sorted slots of
//! the series that carry it (Prometheus's postings), so a selector's
//! series are found by a few list intersections instead of a scan of every
//! series, and a tag's values are listed without reading any series.

use std::collections::HashMap;

/// What a series' value of a tag must be (a series without the tag has
/// the value `""`, as PromQL and InfluxQL read it).
pub enum TagTest<'a> {
    /// Equal to this value.
    Equal(&'a str),
    /// Accepted by this predicate (a regular expression, an inequality).
    Matches(&'a dyn Fn(&str) -> bool),
}

/// One tag of a selection: the series whose value of `key` passes `test`.
pub struct TagMatcher<'a> {
    /// The tag key.
    pub key: &'a str,
    /// What its value must be.
    pub test: TagTest<'a>,
}

impl TagTest<'_> {
    fn accepts(&self, value: &str) -> bool {
        match self {
            TagTest::Equal(wanted) => value == *wanted,
            TagTest::Matches(test) => test(value),
        }
    }
}

/// Bytes counted per distinct (key, value) besides their text, and per
/// series carrying one.
pub(super) const ENTRY_BYTES: usize = 64;
pub(super) const SLOT_BYTES: usize = 4;

/// Tag key → value → slots, each list sorted.
#[derive(Debug, Default)]
pub(super) struct Postings {
    keys: HashMap<Box<str>, HashMap<Box<str>, Vec<u32>>>,
}

impl Postings {
    /// Adds `slot` to the lists of its tags; returns the bytes it grew by.
    /// Slots usually come in increasing order (new series are appended),
    /// but a series whose tags arrive late is put in its place.
    pub(super) fn add(&mut self, slot: u32, tags: &[(String, String)]) -> usize {
        let mut grown = 0;
        for (key, value) in tags {
            let values = match self.keys.get_mut(key.as_str()) {
                Some(values) => values,
                None => {
                    grown += key.len();
                    self.keys.entry(key.as_str().into()).or_default()
                }
            };
            let slots = match values.get_mut(value.as_str()) {
                Some(slots) => slots,
                None => {
                    grown += ENTRY_BYTES + value.len();
                    values.entry(value.as_str().into()).or_default()
                }
            };
            match slots.last() {
                Some(&last) if last >= slot => {
                    if let Err(at) = slots.binary_search(&slot) {
                        slots.insert(at, slot);
                    }
                }
                _ => slots.push(slot),
            }
            grown += SLOT_BYTES;
        }
        grown
    }

    /// The slots (sorted) of `all` series that every matcher accepts.
    pub(super) fn select(&self, all: u32, matchers: &[TagMatcher<'_>]) -> Vec<u32> {
        // Matchers that name values first: their lists are short.
        let mut order: Vec<&TagMatcher<'_>> = matchers.iter().collect();
        order.sort_by_key(|m| match m.test {
            TagTest::Equal(v) if !v.is_empty() => 0,
            _ => 1,
        });
        let mut selected: Option<Vec<u32>> = None;
        for matcher in order {
            if selected.as_ref().is_some_and(Vec::is_empty) {
                break;
            }
            let found = self.matching(all, matcher);
            selected = Some(match selected {
                None => found,
                Some(before) => intersect(&before, &found),
            });
        }
        selected.unwrap_or_else(|| (0..all).collect())
    }

    /// The slots of `all` series whose value of the matcher's key it
    /// accepts.
    fn matching(&self, all: u32, matcher: &TagMatcher<'_>) -> Vec<u32> {
        let values = self.keys.get(matcher.key);
        if let TagTest::Equal(wanted) = matcher.test {
            if !wanted.is_empty() {
                return values
                    .and_then(|values| values.get(wanted))
                    .cloned()
                    .unwrap_or_default();
            }
        }
        let Some(values) = values else {
            // No series has the key: each reads as "".
            return match matcher.test.accepts("") {
                true => (0..all).collect(),
                false => Vec::new(),
            };
        };
        if matcher.test.accepts("") {
            // Every series but those with a value refused.
            let refused: Vec<&[u32]> = values
                .iter()
                .filter(|(value, _)| !matcher.test.accepts(value))
                .map(|(_, slots)| slots.as_slice())
                .collect();
            let refused = union(&refused);
            let mut out = Vec::with_capacity(all as usize - refused.len().min(all as usize));
            let mut refused = refused.iter().peekable();
            for slot in 0..all {
                if refused.next_if_eq(&&slot).is_none() {
                    out.push(slot);
                }
            }
            out
        } else {
            let accepted: Vec<&[u32]> = values
                .iter()
                .filter(|(value, _)| matcher.test.accepts(value))
                .map(|(_, slots)| slots.as_slice())
                .collect();
            union(&accepted)
        }
    }

    /// The values of `key` among `slots` (sorted), or every value of `key`
    /// when `slots` is `None`; sorted, each once.
    pub(super) fn values(&self, key: &str, slots: Option<&[u32]>) -> Vec<String> {
        let Some(values) = self.keys.get(key) else {
            return Vec::new();
        };
        let mut out: Vec<String> = values
            .iter()
            .filter(|(_, list)| match slots {
                None => !list.is_empty(),
                Some(slots) => !intersect(list, slots).is_empty(),
            })
            .map(|(value, _)| value.to_string())
            .collect();
        out.sort_unstable();
        out
    }
}

/// The slots in both sorted lists.
fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let mut out = Vec::with_capacity(short.len());
    // A short list against a long one: bisect the long one.
    if short.len() * 16 < long.len() {
        let mut rest = long;
        for &slot in short {
            let at = rest.partition_point(|&s| s < slot);
            if rest.get(at) == Some(&slot) {
                out.push(slot);
            }
            rest = &rest[at..];
        }
        return out;
    }
    let (mut i, mut j) = (0, 0);
    while i < short.len() && j < long.len() {
        match short[i].cmp(&long[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(short[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// The slots in any of the sorted lists, sorted, each once.
fn union(lists: &[&[u32]]) -> Vec<u32> {
    match lists {
        [] => Vec::new(),
        [one] => one.to_vec(),
        _ => {
            let mut out: Vec<u32> = lists.iter().flat_map(|l| l.iter().copied()).collect();
            out.sort_unstable();
            out.dedup();
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Four series: 0 {job=a, mode=idle}, 1 {job=a, mode=user}, 2 {job=b,
    /// mode=idle}, 3 {job=b} (no mode).
    fn four() -> Postings {
        let mut postings = Postings::default();
        postings.add(0, &tags(&[("job", "a"), ("mode", "idle")]));
        postings.add(1, &tags(&[("job", "a"), ("mode", "user")]));
        postings.add(3, &tags(&[("job", "b")]));
        // Late tags: put in place.
        postings.add(2, &tags(&[("job", "b"), ("mode", "idle")]));
        postings
    }

    fn select(postings: &Postings, matchers: &[TagMatcher<'_>]) -> Vec<u32> {
        postings.select(4, matchers)
    }

    #[test]
    fn matchers_select_as_a_scan_would() {
        let p = four();
        let eq = |key, value| TagMatcher {
            key,
            test: TagTest::Equal(value),
        };
        let not_idle = |v: &str| v != "idle";
        let starts_i = |v: &str| v.starts_with('i');
        let empty_or_user = |v: &str| v.is_empty() || v == "user";
        assert_eq!(select(&p, &[eq("job", "a")]), [0, 1]);
        assert_eq!(select(&p, &[eq("job", "b"), eq("mode", "idle")]), [2]);
        assert_eq!(select(&p, &[eq("job", "c")]), [] as [u32; 0]);
        // A series without the tag reads as "".
        assert_eq!(select(&p, &[eq("mode", "")]), [3]);
        assert_eq!(select(&p, &[eq("absent", "")]), [0, 1, 2, 3]);
        assert_eq!(select(&p, &[eq("absent", "x")]), [] as [u32; 0]);
        let m = |key, test| TagMatcher {
            key,
            test: TagTest::Matches(test),
        };
        assert_eq!(select(&p, &[m("mode", &not_idle)]), [1, 3]);
        assert_eq!(select(&p, &[m("mode", &starts_i)]), [0, 2]);
        assert_eq!(select(&p, &[m("mode", &empty_or_user)]), [1, 3]);
        assert_eq!(select(&p, &[m("mode", &not_idle), eq("job", "b")]), [3]);
        assert_eq!(select(&p, &[]), [0, 1, 2, 3]);
    }

    #[test]
    fn values_of_a_key_among_slots() {
        let p = four();
        assert_eq!(p.values("mode", None), ["idle", "user"]);
        assert_eq!(p.values("mode", Some(&[2, 3])), ["idle"]);
        assert_eq!(p.values("job", Some(&[1, 2])), ["a", "b"]);
        assert!(p.values("absent", None).is_empty());
    }

    #[test]
    fn intersections_of_short_and_long_lists() {
        let long: Vec<u32> = (0..1000).step_by(3).collect();
        assert_eq!(intersect(&[3, 4, 999, 2000], &long), [3, 999]);
        assert_eq!(intersect(&long, &[0, 6]), [0, 6]);
        assert_eq!(intersect(&[1, 2, 3], &[2, 3, 4]), [2, 3]);
        assert_eq!(union(&[&[1, 5], &[2, 5, 9]]), [1, 2, 5, 9]);
    }
}
