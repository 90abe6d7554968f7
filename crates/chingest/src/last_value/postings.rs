//! A table's index of tags: every series' tags as pairs of ids of strings
//! kept once per table, and the inverted index (key, value) → the sorted
//! slots of the series that carry it (Prometheus's postings).
//!
//! A selector's series are found by a few list intersections instead of a
//! scan of every series; a tag's values, or the keys of some series, are
//! listed without building any series' tags. Shaped for a million series:
//! a series' tags cost 8 bytes a pair in one arena (no allocation of its
//! own), each key and value text is stored once however many series carry
//! it, and a value only one series carries (a pod's name) keeps its slot
//! inline instead of in a list (measured in `tests/index.rs`).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use hashbrown::HashTable;

use crate::layout::series::SeriesIdHasher;

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

/// Bytes counted per distinct text besides its length: where it is, and
/// its entry in the hash table.
const STRING_BYTES: usize = 20;
/// Bytes counted per distinct (key, value) pair: its postings entry and
/// its place in the key's list of values.
const PAIR_BYTES: usize = 32;
/// Bytes per tag of a series: its pair in the arena and its slot in the
/// pair's postings.
pub(super) const TAG_BYTES: usize = 12;

/// Where a series' tags are in the index's arena: `len` pairs from `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TagsAt {
    start: u32,
    len: u32,
}

impl TagsAt {
    /// A series whose tags are not known yet.
    pub(super) const UNKNOWN: TagsAt = TagsAt {
        start: 0,
        len: u32::MAX,
    };

    pub(super) fn is_known(self) -> bool {
        self.len != u32::MAX
    }
}

/// Bytes of a block of [`Strings`]' texts.
const BLOCK: usize = 64 << 10;

/// Strings kept once, numbered in the order first met, laid end to end in
/// blocks that never move (no allocation, no pointer a text).
#[derive(Debug, Default)]
struct Strings {
    /// Of [`BLOCK`] bytes, or one longer text alone.
    blocks: Vec<String>,
    /// Each text's block, start and length.
    spans: Vec<(u32, u32, u32)>,
    /// Ids into `spans`, found by the text's hash.
    ids: HashTable<u32>,
}

fn hash(text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

impl Strings {
    fn id(&self, text: &str) -> Option<u32> {
        self.ids
            .find(hash(text), |&id| self.text(id) == text)
            .copied()
    }

    /// The id of `text`, added if new; and the bytes it grew by.
    fn intern(&mut self, text: &str) -> (u32, usize) {
        if let Some(id) = self.id(text) {
            return (id, 0);
        }
        let id = u32::try_from(self.spans.len()).expect("fewer than 2^32 tag texts in a table");
        let fits = |block: &String| block.len() + text.len() <= block.capacity();
        if !self.blocks.last().is_some_and(fits) {
            self.blocks
                .push(String::with_capacity(BLOCK.max(text.len())));
        }
        let block = self.blocks.len() - 1;
        let start = self.blocks[block].len();
        self.blocks[block].push_str(text);
        let narrow = |n: usize| u32::try_from(n).expect("tag texts under 4 GiB");
        self.spans
            .push((narrow(block), narrow(start), narrow(text.len())));
        let (blocks, spans) = (&self.blocks, &self.spans);
        self.ids.insert_unique(hash(text), id, |&id| {
            hash(text_of(blocks, spans[id as usize]))
        });
        (id, STRING_BYTES + text.len())
    }

    fn text(&self, id: u32) -> &str {
        text_of(&self.blocks, self.spans[id as usize])
    }
}

fn text_of(blocks: &[String], (block, start, len): (u32, u32, u32)) -> &str {
    &blocks[block as usize][start as usize..(start + len) as usize]
}

/// The slots of one (key, value) pair's series, sorted: inline while one
/// series carries it (a pod's name), boxed when many do (a 16-byte entry
/// either way).
#[derive(Debug, Clone)]
enum Posting {
    One(u32),
    #[allow(clippy::box_collection)]
    Many(Box<Vec<u32>>),
}

impl Posting {
    fn slots(&self) -> &[u32] {
        match self {
            Posting::One(slot) => std::slice::from_ref(slot),
            Posting::Many(slots) => slots,
        }
    }

    /// Adds `slot` in its place (usually last: new series are appended).
    fn add(&mut self, slot: u32) {
        match self {
            Posting::One(one) if *one == slot => {}
            Posting::One(one) => {
                *self = Posting::Many(Box::new(vec![(*one).min(slot), (*one).max(slot)]));
            }
            Posting::Many(slots) => match slots.last() {
                Some(&last) if last >= slot => {
                    if let Err(at) = slots.binary_search(&slot) {
                        slots.insert(at, slot);
                    }
                }
                _ => slots.push(slot),
            },
        }
    }
}

type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<SeriesIdHasher>>;

/// A (key, value) pair of ids as one map key.
fn pair(key: u32, value: u32) -> u64 {
    (u64::from(key) << 32) | u64::from(value)
}

/// Which series a listing of tag values or keys reads.
#[derive(Clone, Copy)]
pub(super) enum Among<'a> {
    /// Every series indexed.
    Every,
    /// Those this test keeps: each value's postings are read only until
    /// one is kept (no selection is built).
    Kept(&'a dyn Fn(u32) -> bool),
    /// These slots (sorted).
    Slots(&'a [u32]),
}

/// The tags of a table's series and their postings.
#[derive(Debug, Default)]
pub(super) struct TagIndex {
    strings: Strings,
    /// Every tagged series' (key, value) ids, series after series; a
    /// series' sorted by key text.
    arena: Vec<(u32, u32)>,
    /// (key, value) → the slots of the series carrying it.
    postings: IdMap<u64, Posting>,
    /// Key → the values some series carries, in the order first met.
    values: IdMap<u32, Vec<u32>>,
}

impl TagIndex {
    /// Records the tags (sorted by key) of the series in `slot`; returns
    /// where they are and the bytes the index grew by. Slots usually come
    /// in increasing order (new series are appended), but a series whose
    /// tags arrive late is put in its place.
    pub(super) fn add(&mut self, slot: u32, tags: &[(String, String)]) -> (TagsAt, usize) {
        let start = u32::try_from(self.arena.len()).expect("fewer than 2^32 tags in a table");
        let mut grown = tags.len() * TAG_BYTES;
        for (key, value) in tags {
            let (key, key_grown) = self.strings.intern(key);
            let (value, value_grown) = self.strings.intern(value);
            grown += key_grown + value_grown;
            self.arena.push((key, value));
            if self.post(key, value, slot) {
                grown += PAIR_BYTES;
            }
        }
        let len = u32::try_from(tags.len()).expect("fewer than 2^32 tags in a series");
        (TagsAt { start, len }, grown)
    }

    /// Adds `slot` to the postings of `key=value`; whether the pair is new.
    fn post(&mut self, key: u32, value: u32, slot: u32) -> bool {
        match self.postings.get_mut(&pair(key, value)) {
            Some(posting) => {
                posting.add(slot);
                false
            }
            None => {
                self.postings.insert(pair(key, value), Posting::One(slot));
                self.values.entry(key).or_default().push(value);
                true
            }
        }
    }

    /// The (key, value) pairs of the series whose tags are `at`, sorted by
    /// key.
    pub(super) fn tags(&self, at: TagsAt) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.arena_of(at)
            .iter()
            .map(|&(k, v)| (self.strings.text(k), self.strings.text(v)))
    }

    /// The value of `key` among the tags `at`; `""` when they have none.
    pub(super) fn value(&self, at: TagsAt, key: &str) -> &str {
        let value = self.strings.id(key).and_then(|key| self.value_of(at, key));
        value.map_or("", |value| self.strings.text(value))
    }

    /// The tags as owned pairs.
    pub(super) fn owned_tags(&self, at: TagsAt) -> Vec<(String, String)> {
        self.tags(at)
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// Makes the postings again for series that moved to other slots
    /// (`series` gives each slot's tags, in slot order); the arena stays.
    pub(super) fn reindex(&mut self, series: impl Iterator<Item = TagsAt>) {
        self.postings.clear();
        self.values.clear();
        for (slot, at) in series.enumerate() {
            for i in 0..self.arena_of(at).len() {
                let (key, value) = self.arena_of(at)[i];
                self.post(key, value, slot as u32);
            }
        }
    }

    /// The slots (sorted) of `all` series that every matcher accepts
    /// (`tags_of` says where a slot's tags are).
    ///
    /// Matchers naming a value are their postings, intersected shortest
    /// first without copying; the others then test the few series left by
    /// their tags, or, while many are left, union the postings of the
    /// values they accept.
    pub(super) fn select(
        &self,
        all: u32,
        matchers: &[TagMatcher<'_>],
        tags_of: impl Fn(u32) -> TagsAt,
    ) -> Vec<u32> {
        let mut named: Vec<&[u32]> = Vec::new();
        let mut others: Vec<&TagMatcher<'_>> = Vec::new();
        for matcher in matchers {
            match matcher.test {
                TagTest::Equal(value) if !value.is_empty() => {
                    named.push(self.posting(matcher.key, value))
                }
                _ => others.push(matcher),
            }
        }
        named.sort_by_key(|slots| slots.len());
        let mut selected: Option<Vec<u32>> = None;
        for slots in named {
            selected = Some(match selected {
                None => slots.to_vec(),
                Some(before) => intersect(&before, slots),
            });
            if selected.as_ref().is_some_and(Vec::is_empty) {
                return Vec::new();
            }
        }
        for matcher in others {
            selected = Some(match selected {
                // Few left: a look at each one's value.
                Some(mut before) if before.len() < all as usize / 64 => {
                    before.retain(|&slot| {
                        matcher.test.accepts(self.value(tags_of(slot), matcher.key))
                    });
                    before
                }
                Some(before) => intersect(&before, &self.matching(all, matcher)),
                None => self.matching(all, matcher),
            });
        }
        selected.unwrap_or_else(|| (0..all).collect())
    }

    /// The slots of the series carrying `key=value`.
    fn posting(&self, key: &str, value: &str) -> &[u32] {
        match (self.strings.id(key), self.strings.id(value)) {
            (Some(key), Some(value)) => self.slots_of(key, value),
            _ => &[],
        }
    }

    /// The slots of the series carrying the pair of ids `key=value`.
    fn slots_of(&self, key: u32, value: u32) -> &[u32] {
        self.postings
            .get(&pair(key, value))
            .map_or(&[], Posting::slots)
    }

    /// The value id of `key` among the tags `at`.
    fn value_of(&self, at: TagsAt, key: u32) -> Option<u32> {
        self.arena_of(at)
            .iter()
            .find(|(k, _)| *k == key)
            .map(|&(_, v)| v)
    }

    /// The postings of `key`'s values that `accept` takes.
    fn lists_of(&self, key: u32, mut accept: impl FnMut(&str) -> bool) -> Vec<&[u32]> {
        let Some(values) = self.values.get(&key) else {
            return Vec::new();
        };
        values
            .iter()
            .filter(|&&value| accept(self.strings.text(value)))
            .map(|&value| self.slots_of(key, value))
            .collect()
    }

    /// The slots of `all` series whose value of the matcher's key it
    /// accepts.
    fn matching(&self, all: u32, matcher: &TagMatcher<'_>) -> Vec<u32> {
        if let TagTest::Equal(wanted) = matcher.test {
            if !wanted.is_empty() {
                return self.posting(matcher.key, wanted).to_vec();
            }
        }
        let key = self.strings.id(matcher.key);
        let Some(key) = key.filter(|key| self.values.contains_key(key)) else {
            // No series has the key: each reads as "".
            return match matcher.test.accepts("") {
                true => (0..all).collect(),
                false => Vec::new(),
            };
        };
        if matcher.test.accepts("") {
            // Every series but those with a value refused.
            let refused = union(&self.lists_of(key, |value| !matcher.test.accepts(value)));
            let mut out = Vec::with_capacity(all as usize - refused.len().min(all as usize));
            let mut refused = refused.iter().peekable();
            for slot in 0..all {
                if refused.next_if_eq(&&slot).is_none() {
                    out.push(slot);
                }
            }
            out
        } else {
            union(&self.lists_of(key, |value| matcher.test.accepts(value)))
        }
    }

    /// The values of `key` the series `among` names carry (`tags_of` says
    /// where a slot's tags are); sorted, each once, without `""`.
    pub(super) fn values(
        &self,
        key: &str,
        among: Among<'_>,
        tags_of: impl Fn(u32) -> TagsAt,
    ) -> Vec<String> {
        let Some(key) = self.strings.id(key) else {
            return Vec::new();
        };
        let values = self.values.get(&key).map_or(&[][..], Vec::as_slice);
        let ids: Vec<u32> = match among {
            Among::Every => values.to_vec(),
            Among::Kept(keep) => values
                .iter()
                .copied()
                .filter(|&value| self.slots_of(key, value).iter().any(|&slot| keep(slot)))
                .collect(),
            // Few values against many series: the values whose postings
            // meet the slots.
            Among::Slots(slots) if values.len() * 8 < slots.len() => values
                .iter()
                .copied()
                .filter(|&value| meet(self.slots_of(key, value), slots))
                .collect(),
            Among::Slots(slots) => {
                let mut ids: Vec<u32> = slots
                    .iter()
                    .filter_map(|&slot| self.value_of(tags_of(slot), key))
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                ids
            }
        };
        self.sorted_texts(ids)
    }

    /// The keys the series `among` names carry; sorted, each once.
    pub(super) fn keys(&self, among: Among<'_>, tags_of: impl Fn(u32) -> TagsAt) -> Vec<String> {
        let ids: Vec<u32> = match among {
            Among::Every => self.values.keys().copied().collect(),
            Among::Kept(keep) => self
                .values
                .iter()
                .filter(|(&key, values)| {
                    values
                        .iter()
                        .any(|&value| self.slots_of(key, value).iter().any(|&slot| keep(slot)))
                })
                .map(|(&key, _)| key)
                .collect(),
            Among::Slots(slots) => {
                let mut ids: Vec<u32> = Vec::new();
                for &slot in slots {
                    for &(key, _) in self.arena_of(tags_of(slot)) {
                        if !ids.contains(&key) {
                            ids.push(key);
                        }
                    }
                    // Every key is met once the few keys of a measurement
                    // are: stop early on a long list of alike series.
                    if ids.len() == self.values.len() {
                        break;
                    }
                }
                ids
            }
        };
        self.sorted_texts(ids)
    }

    fn arena_of(&self, at: TagsAt) -> &[(u32, u32)] {
        match at.is_known() {
            true => &self.arena[at.start as usize..(at.start + at.len) as usize],
            false => &[],
        }
    }

    fn sorted_texts(&self, ids: Vec<u32>) -> Vec<String> {
        let mut out: Vec<String> = ids
            .into_iter()
            .map(|id| self.strings.text(id))
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
            .collect();
        out.sort_unstable();
        out.dedup();
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

/// Whether the sorted lists have a slot in common.
fn meet(a: &[u32], b: &[u32]) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.len() * 16 < long.len() {
        return short.iter().any(|slot| long.binary_search(slot).is_ok());
    }
    let (mut i, mut j) = (0, 0);
    while i < short.len() && j < long.len() {
        match short[i].cmp(&long[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => return true,
        }
    }
    false
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
    /// mode=idle}, 3 {job=b} (no mode); and where each one's tags are.
    fn four() -> (TagIndex, Vec<TagsAt>) {
        let mut index = TagIndex::default();
        let mut at = vec![TagsAt::UNKNOWN; 4];
        at[0] = index.add(0, &tags(&[("job", "a"), ("mode", "idle")])).0;
        at[1] = index.add(1, &tags(&[("job", "a"), ("mode", "user")])).0;
        at[3] = index.add(3, &tags(&[("job", "b")])).0;
        // Late tags: put in place.
        at[2] = index.add(2, &tags(&[("job", "b"), ("mode", "idle")])).0;
        (index, at)
    }

    #[test]
    fn matchers_select_as_a_scan_would() {
        let (p, at) = four();
        let select = |matchers: &[TagMatcher<'_>]| p.select(4, matchers, |s| at[s as usize]);
        let eq = |key, value| TagMatcher {
            key,
            test: TagTest::Equal(value),
        };
        let not_idle = |v: &str| v != "idle";
        let starts_i = |v: &str| v.starts_with('i');
        let empty_or_user = |v: &str| v.is_empty() || v == "user";
        assert_eq!(select(&[eq("job", "a")]), [0, 1]);
        assert_eq!(select(&[eq("job", "b"), eq("mode", "idle")]), [2]);
        assert_eq!(select(&[eq("job", "c")]), [] as [u32; 0]);
        // A series without the tag reads as "".
        assert_eq!(select(&[eq("mode", "")]), [3]);
        assert_eq!(select(&[eq("absent", "")]), [0, 1, 2, 3]);
        assert_eq!(select(&[eq("absent", "x")]), [] as [u32; 0]);
        // A value that is some other key's text selects nothing.
        assert_eq!(select(&[eq("job", "mode")]), [] as [u32; 0]);
        let m = |key, test| TagMatcher {
            key,
            test: TagTest::Matches(test),
        };
        assert_eq!(select(&[m("mode", &not_idle)]), [1, 3]);
        assert_eq!(select(&[m("mode", &starts_i)]), [0, 2]);
        assert_eq!(select(&[m("mode", &empty_or_user)]), [1, 3]);
        assert_eq!(select(&[m("mode", &not_idle), eq("job", "b")]), [3]);
        assert_eq!(select(&[]), [0, 1, 2, 3]);
    }

    #[test]
    fn values_and_keys_among_slots() {
        let (p, at) = four();
        let of = |slot: u32| at[slot as usize];
        assert_eq!(p.values("mode", Among::Every, of), ["idle", "user"]);
        assert_eq!(p.values("mode", Among::Slots(&[2, 3]), of), ["idle"]);
        assert_eq!(p.values("job", Among::Slots(&[1, 2]), of), ["a", "b"]);
        assert!(p.values("absent", Among::Every, of).is_empty());
        assert_eq!(p.keys(Among::Every, of), ["job", "mode"]);
        assert_eq!(p.keys(Among::Slots(&[3]), of), ["job"]);
        assert_eq!(p.value(at[1], "mode"), "user");
        assert_eq!(p.value(at[3], "mode"), "");
        assert_eq!(
            p.tags(at[1]).collect::<Vec<_>>(),
            [("job", "a"), ("mode", "user")]
        );
        assert_eq!(p.tags(TagsAt::UNKNOWN).count(), 0);
    }

    #[test]
    fn values_and_keys_of_series_a_test_keeps() {
        let (p, at) = four();
        let of = |slot: u32| at[slot as usize];
        let odd = |slot: u32| slot % 2 == 1;
        assert_eq!(p.values("mode", Among::Kept(&odd), of), ["user"]);
        assert_eq!(p.values("job", Among::Kept(&odd), of), ["a", "b"]);
        assert_eq!(p.keys(Among::Kept(&|slot| slot == 3), of), ["job"]);
        assert!(p.keys(Among::Kept(&|_| false), of).is_empty());
    }

    #[test]
    fn entries_stay_small() {
        // What the docs' bytes a series count on.
        assert_eq!(std::mem::size_of::<Posting>(), 16);
        assert_eq!(std::mem::size_of::<TagsAt>(), 8);
    }

    #[test]
    fn reindexed_after_slots_move() {
        let (mut p, at) = four();
        // Series 1 leaves: 2 and 3 move down.
        let moved = [at[0], at[2], at[3]];
        p.reindex(moved.iter().copied());
        let eq = |key, value| TagMatcher {
            key,
            test: TagTest::Equal(value),
        };
        let of = |s: u32| moved[s as usize];
        assert_eq!(p.select(3, &[eq("job", "b")], of), [1, 2]);
        assert_eq!(p.select(3, &[eq("mode", "user")], of), [] as [u32; 0]);
        assert_eq!(
            p.values("mode", Among::Every, |s| moved[s as usize]),
            ["idle"]
        );
    }

    /// A predicate on a value, as a `Matches` test holds one.
    type Test = Box<dyn Fn(&str) -> bool>;

    proptest::proptest! {
        /// Any matchers over any series select what a scan of their tags
        /// would, values and keys alike, on both sides of the point where
        /// the few series left are tested one by one.
        #[test]
        fn the_index_answers_as_a_scan(
            series in proptest::collection::vec(
                proptest::collection::btree_map(0u8..4, 0u8..30, 0..4), 1..400),
            matchers in proptest::collection::vec((0u8..4, 0u8..31, 0u8..3), 0..4),
        ) {
            let text = |key: u8, value: u8| (format!("k{key}"), format!("v{value}"));
            let mut index = TagIndex::default();
            let mut at = Vec::new();
            let mut all_tags = Vec::new();
            for (slot, tags) in series.iter().enumerate() {
                let tags: Vec<(String, String)> = tags.iter().map(|(&k, &v)| text(k, v)).collect();
                at.push(index.add(slot as u32, &tags).0);
                all_tags.push(tags);
            }
            // Kind 0: equal (value 30: one no series has); 1: not equal; 2:
            // a value at most the given one (a predicate).
            let values: Vec<(String, String)> = matchers.iter().map(|&(k, v, _)| text(k, v)).collect();
            let tests: Vec<Test> = matchers
                .iter()
                .zip(&values)
                .map(|(&(_, _, kind), (_, value))| -> Test {
                    let value = value.clone();
                    match kind {
                        1 => Box::new(move |v: &str| v != value),
                        _ => Box::new(move |v: &str| !v.is_empty() && v <= value.as_str()),
                    }
                })
                .collect();
            let built: Vec<TagMatcher<'_>> = matchers
                .iter()
                .zip(&values)
                .zip(&tests)
                .map(|((&(_, _, kind), (key, value)), test)| TagMatcher {
                    key,
                    test: match kind {
                        0 => TagTest::Equal(value),
                        _ => TagTest::Matches(test.as_ref()),
                    },
                })
                .collect();
            let value_of = |tags: &[(String, String)], key: &str| {
                tags.iter().find(|(k, _)| k == key).map_or("", |(_, v)| v.as_str()).to_owned()
            };
            let scanned: Vec<u32> = (0..series.len() as u32)
                .filter(|&slot| {
                    built.iter().all(|m| m.test.accepts(&value_of(&all_tags[slot as usize], m.key)))
                })
                .collect();
            let of = |slot: u32| at[slot as usize];
            let selected = index.select(series.len() as u32, &built, of);
            proptest::prop_assert_eq!(&selected, &scanned);
            let mut values: Vec<String> = scanned
                .iter()
                .map(|&slot| value_of(&all_tags[slot as usize], "k0"))
                .filter(|v| !v.is_empty())
                .collect();
            values.sort();
            values.dedup();
            proptest::prop_assert_eq!(&index.values("k0", Among::Slots(&selected), of), &values);
            let kept = |slot: u32| selected.binary_search(&slot).is_ok();
            proptest::prop_assert_eq!(index.values("k0", Among::Kept(&kept), of), values);
            let mut keys: Vec<String> = scanned
                .iter()
                .flat_map(|&slot| all_tags[slot as usize].iter().map(|(k, _)| k.clone()))
                .collect();
            keys.sort();
            keys.dedup();
            proptest::prop_assert_eq!(&index.keys(Among::Slots(&selected), of), &keys);
            proptest::prop_assert_eq!(index.keys(Among::Kept(&kept), of), keys);
        }
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
