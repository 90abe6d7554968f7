//! One compressed run of a series' samples: times as deltas of deltas
//! and values as deltas of decimal integers or as XORs of their bits, in a
//! bit stream (Gorilla, as Prometheus's head chunks; VictoriaMetrics'
//! blocks turn decimal floats into integers the same way).
//!
//! - Times are stored in the chunk's unit, the coarsest of s, ms, µs and
//!   ns that divides every one of them: a scrape's jitter of a few ms is
//!   then a few units, not millions.
//! - Values that are decimals (a counter of ticks over 100, a byte count)
//!   are stored as integers `m` with `value = m / 10^e`, each as the
//!   change from the one before, less the trailing zero bits every change
//!   of the chunk has (a gauge of pages moves by multiples of 4096: 12
//!   bits a sample saved); any other float (a ratio, NaN, -0) puts the
//!   chunk in XOR mode. Either way a value decodes to its very bits.
//! - A time's change of interval goes in the shortest of a few bit widths
//!   behind a prefix code ([`BUCKETS`]); a value's change in the width of
//!   the one before when it fits ([`Bits::put_windowed`]). Either costs one
//!   bit when nothing changed: a steady scrape, a constant gauge.
//!
//! A chunk only appends; anything else (a sample at or before its last
//! time, a value its mode cannot hold) makes the caller decode it and
//! encode it again ([`Chunk::encode`] picks the mode that holds all).

/// The prefix-coded widths a signed number is written in: `0` alone is
/// the bit `0`; else `1…10` (one `1` per bucket passed) and the number in
/// the bucket's width. The last bucket's prefix has no closing `0`.
const BUCKETS: [u32; 6] = [3, 7, 12, 20, 32, 64];

/// The most decimal places a value is stored with as an integer.
const MAX_PLACES: u8 = 12;

/// [`Head::shift`] before a chunk has a change that is not zero.
const UNDECIDED: u8 = u8::MAX;

/// Values: integers over `10^places`, or raw bits XORed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Values {
    Decimal(u8),
    Xor,
}

const POW10: [f64; MAX_PLACES as usize + 1] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
];

/// Integers a float holds exactly.
const EXACT: f64 = 9_007_199_254_740_992.0;

impl Values {
    /// `value` as `m` with `value = m / 10^places`, when that gives back
    /// its very bits.
    fn decimal(value: f64, places: u8) -> Option<i64> {
        let scale = POW10[places as usize];
        let m = (value * scale).round();
        // Through the integer, as decoding goes: -0 comes back as 0.
        (m.abs() < EXACT && ((m as i64) as f64 / scale).to_bits() == value.to_bits())
            .then_some(m as i64)
    }

    /// The mode that holds every one of `samples`' values (the fewest
    /// decimal places, else XOR), and each value's bits in it.
    fn holding(samples: &[(i64, f64)]) -> (Values, Vec<u64>) {
        let mut bits = Vec::with_capacity(samples.len());
        for places in 0..=MAX_PLACES {
            bits.clear();
            let held = samples.iter().all(|&(_, value)| {
                let m = Values::decimal(value, places);
                bits.extend(m.map(|m| m as u64));
                m.is_some()
            });
            if held {
                return (Values::Decimal(places), bits);
            }
        }
        bits.clear();
        bits.extend(samples.iter().map(|s| s.1.to_bits()));
        (Values::Xor, bits)
    }

    fn tag(self) -> u8 {
        match self {
            Values::Decimal(places) => places,
            Values::Xor => u8::MAX,
        }
    }

    fn from_tag(tag: u8) -> Values {
        match tag {
            u8::MAX => Values::Xor,
            places => Values::Decimal(places),
        }
    }
}

/// Time units, coarsest first.
const UNITS: [i64; 4] = [1_000_000_000, 1_000_000, 1_000, 1];

/// The coarsest unit dividing every one of `times`.
fn unit_of(times: impl Iterator<Item = i64> + Clone) -> u8 {
    (0..UNITS.len())
        .find(|&u| times.clone().all(|t| t % UNITS[u] == 0))
        .unwrap_or(UNITS.len() - 1) as u8
}

/// What a chunk's stream needs to be read: its span, count, unit and
/// value mode.
#[derive(Debug, Clone, Copy, Default)]
struct Head {
    first: i64,
    last: i64,
    count: u32,
    unit: u8,
    values: u8,
    /// Decimal mode: the trailing zero bits every change of value has,
    /// left out of the stream ([`UNDECIDED`] while every change is 0).
    shift: u8,
}

impl Head {
    /// The bits a decimal change is shifted by.
    fn shift(&self) -> u32 {
        match self.shift {
            UNDECIDED => 0,
            shift => u32::from(shift),
        }
    }
}

/// The trailing zero bits of a change that is not 0.
fn zeros(change: i64) -> u8 {
    change.trailing_zeros() as u8
}

/// A full chunk: samples sorted by time, one per time, never appended to.
#[derive(Debug, Clone)]
pub(super) struct Chunk {
    head: Head,
    bytes: Box<[u8]>,
}

/// The chunk a series appends to, with the encoder's state after its
/// last sample.
#[derive(Debug, Clone, Default)]
pub(super) struct Open {
    head: Head,
    bits: Bits,
    prev_delta: i64,
    prev_value: u64,
    /// XOR mode: the last XOR's leading and trailing zero bits.
    leading: u8,
    trailing: u8,
    /// Decimal mode: the width the last change was written in.
    width: u8,
}

/// A chunk's samples, read.
#[derive(Debug, Clone, Copy)]
pub(super) struct View<'a> {
    head: &'a Head,
    bytes: &'a [u8],
}

impl Chunk {
    pub(super) fn view(&self) -> View<'_> {
        View {
            head: &self.head,
            bytes: &self.bytes,
        }
    }

    /// Bytes of memory it takes, besides the struct.
    pub(super) fn bytes(&self) -> usize {
        self.bytes.len()
    }
}

impl Open {
    /// The samples, encoded (sorted by time, one per time).
    pub(super) fn encode(samples: &[(i64, f64)]) -> Open {
        let (values, bits) = Values::holding(samples);
        let shift = match values {
            Values::Decimal(_) => bits
                .windows(2)
                .map(|w| (w[1] as i64).wrapping_sub(w[0] as i64))
                .filter(|&change| change != 0)
                .map(zeros)
                .min()
                .unwrap_or(UNDECIDED),
            Values::Xor => 0,
        };
        let mut open = Open {
            head: Head {
                unit: unit_of(samples.iter().map(|s| s.0)),
                values: values.tag(),
                shift,
                ..Head::default()
            },
            ..Open::default()
        };
        for (&(time, _), bits) in samples.iter().zip(bits) {
            let pushed = open.push_bits(time, bits);
            debug_assert!(pushed, "the unit and mode hold every sample");
        }
        open
    }

    pub(super) fn view(&self) -> View<'_> {
        View {
            head: &self.head,
            bytes: &self.bits.bytes,
        }
    }

    /// Bytes of room its stream takes, besides the struct.
    pub(super) fn bytes(&self) -> usize {
        self.bits.bytes.capacity()
    }

    /// A full chunk of its samples, in no more room than they need.
    pub(super) fn close(self) -> Chunk {
        Chunk {
            head: self.head,
            bytes: self.bits.bytes.into_boxed_slice(),
        }
    }

    /// Appends a sample after the last; false (nothing written) when its
    /// time is not after the last or its unit or mode cannot hold it.
    pub(super) fn push(&mut self, time: i64, value: f64) -> bool {
        let bits = match Values::from_tag(self.head.values) {
            Values::Decimal(places) => match Values::decimal(value, places) {
                Some(m) => m as u64,
                None => return false,
            },
            Values::Xor => value.to_bits(),
        };
        self.push_bits(time, bits)
    }

    /// [`push`](Self::push) of a value as its mode's bits.
    fn push_bits(&mut self, time: i64, bits: u64) -> bool {
        let head = &mut self.head;
        let unit = UNITS[head.unit as usize];
        if time % unit != 0 || (head.count > 0 && time <= head.last) {
            return false;
        }
        let mode = Values::from_tag(head.values);
        // A change with fewer trailing zero bits than the chunk leaves
        // out needs the chunk encoded again.
        let change = (bits as i64).wrapping_sub(self.prev_value as i64);
        if let (Values::Decimal(_), 1.., false) = (mode, head.count, change == 0) {
            match head.shift {
                UNDECIDED => head.shift = zeros(change),
                shift if zeros(change) < shift => return false,
                _ => {}
            }
        }
        let ticks = time / unit;
        match head.count {
            0 => {
                self.bits.put(ticks as u64, 64);
                self.bits.put(bits, 64);
                head.first = time;
            }
            _ => {
                let delta = ticks.wrapping_sub(head.last / unit);
                self.bits.put_signed(delta.wrapping_sub(self.prev_delta));
                self.prev_delta = delta;
                match mode {
                    Values::Decimal(_) => {
                        let change = change >> self.head.shift();
                        self.width = self.bits.put_windowed(change, self.width);
                    }
                    Values::Xor => self.put_xor(bits ^ self.prev_value),
                }
            }
        }
        self.prev_value = bits;
        self.head.last = time;
        self.head.count += 1;
        true
    }

    /// Gorilla's value encoding: `0` for an unchanged value; `10` and the
    /// meaningful bits when they fit the last XOR's window; else `11`, 5
    /// bits of leading zeros, 6 of the meaningful length (0 for 64), and
    /// the bits.
    fn put_xor(&mut self, xor: u64) {
        if xor == 0 {
            self.bits.put(0, 1);
            return;
        }
        let leading = (xor.leading_zeros() as u8).min(31);
        let trailing = xor.trailing_zeros() as u8;
        if self.head.count > 1 && leading >= self.leading && trailing >= self.trailing {
            let width = 64 - u32::from(self.leading) - u32::from(self.trailing);
            self.bits.put(0b10, 2);
            self.bits.put(xor >> self.trailing, width);
        } else {
            let width = 64 - u32::from(leading) - u32::from(trailing);
            self.bits.put(0b11, 2);
            self.bits.put(u64::from(leading), 5);
            self.bits.put(u64::from(width & 63), 6);
            self.bits.put(xor >> trailing, width);
            (self.leading, self.trailing) = (leading, trailing);
        }
    }
}

impl View<'_> {
    pub(super) fn first(&self) -> i64 {
        self.head.first
    }

    pub(super) fn last(&self) -> i64 {
        self.head.last
    }

    pub(super) fn len(&self) -> usize {
        self.head.count as usize
    }

    /// The ns of the unit its times are kept in.
    pub(super) fn unit_ns(&self) -> i64 {
        UNITS[self.head.unit as usize]
    }

    /// Calls `each(time, value)` for every sample, in time order.
    #[inline]
    pub(super) fn for_each(&self, each: impl FnMut(i64, f64)) {
        self.for_each_in(1, each);
    }

    /// Calls `each(time, value)` for every sample, in time order, its time
    /// in units of `per` ns (floored): a multiplication where the chunk's
    /// own unit is a multiple of it. A loop of its own for each way values
    /// are kept, so no sample asks which.
    #[inline]
    pub(super) fn for_each_in(&self, per: i64, mut each: impl FnMut(i64, f64)) {
        if self.head.count == 0 {
            return;
        }
        let mut reader = Reader::new(self.bytes);
        let unit = UNITS[self.head.unit as usize];
        let mut times = Times {
            unit,
            per,
            scale: (unit % per == 0).then_some(unit / per),
            ticks: reader.take(64) as i64,
            delta: 0,
        };
        let mut value = reader.take(64);
        let rest = 1..self.head.count;
        match Values::from_tag(self.head.values) {
            Values::Decimal(places) => {
                let (scale, shift) = (POW10[places as usize], self.head.shift());
                each(times.now(), value as i64 as f64 / scale);
                let mut width = 0;
                for _ in rest {
                    let change = match reader.take_steady(width) {
                        Some(change) => {
                            times.ticks = times.ticks.wrapping_add(times.delta);
                            change
                        }
                        None => {
                            times.next(&mut reader);
                            let change;
                            (change, width) = reader.take_windowed(width);
                            change
                        }
                    };
                    value = (value as i64).wrapping_add(change << shift) as u64;
                    each(times.now(), value as i64 as f64 / scale);
                }
            }
            Values::Xor => {
                each(times.now(), f64::from_bits(value));
                let (mut leading, mut trailing) = (0u32, 0u32);
                for _ in rest {
                    let time = times.next(&mut reader);
                    if reader.take(1) == 1 {
                        if reader.take(1) == 1 {
                            leading = reader.take(5) as u32;
                            let width = match reader.take(6) as u32 {
                                0 => 64,
                                width => width,
                            };
                            trailing = 64 - leading - width;
                        }
                        let width = 64 - leading - trailing;
                        value ^= reader.take(width) << trailing;
                    }
                    each(time, f64::from_bits(value));
                }
            }
        }
    }

    /// Every sample, in time order.
    pub(super) fn decode(&self) -> Vec<(i64, f64)> {
        let mut samples = Vec::with_capacity(self.len());
        self.for_each(|time, value| samples.push((time, value)));
        samples
    }
}

/// A bit stream, most significant bit first.
#[derive(Debug, Clone, Default)]
struct Bits {
    bytes: Vec<u8>,
    /// Bits used in the last byte (0: it is full, or there is none).
    used: u32,
}

impl Bits {
    /// Appends the low `width` (≤ 64) bits of `value`.
    fn put(&mut self, value: u64, width: u32) {
        let mut left = width;
        // The last byte's room first, then whole bytes, then the rest.
        if self.used > 0 && left > 0 {
            let room = 8 - self.used;
            let take = room.min(left);
            let part = (value >> (left - take)) & ((1u64 << take) - 1);
            let last = self.bytes.last_mut().expect("a byte in use");
            *last |= (part as u8) << (room - take);
            self.used = (self.used + take) % 8;
            left -= take;
        }
        while left >= 8 {
            left -= 8;
            self.bytes.push((value >> left) as u8);
        }
        if left > 0 {
            self.bytes.push((value << (8 - left)) as u8);
            self.used = left;
        }
    }

    /// Appends a signed number in its [`BUCKETS`] width.
    fn put_signed(&mut self, value: i64) {
        if value == 0 {
            self.put(0, 1);
            return;
        }
        let last = BUCKETS.len() - 1;
        let bucket = BUCKETS
            .iter()
            .position(|&width| width == 64 || fits(value, width))
            .unwrap_or(last);
        // `bucket + 1` ones, then a zero unless it is the last bucket.
        let (prefix, length) = match bucket == last {
            true => ((1u64 << (bucket + 1)) - 1, bucket as u32 + 1),
            false => (((1u64 << (bucket + 1)) - 1) << 1, bucket as u32 + 2),
        };
        self.put(prefix, length);
        let width = BUCKETS[bucket];
        self.put(value as u64 & mask(width), width);
    }
}

impl Bits {
    /// Appends a signed number in the window of the one before (`width`
    /// bits, 0: none yet), Gorilla's way for values: `0` for zero; `10`
    /// and the number when the window holds it; else `11`, 6 bits of the
    /// new width less one, and the number. A window more than
    /// [`WINDOW_SLACK`] bits wider than the number is replaced (one
    /// counter reset does not widen the rest of a chunk). Returns the
    /// window now.
    fn put_windowed(&mut self, value: i64, width: u8) -> u8 {
        if value == 0 {
            self.put(0, 1);
            return width;
        }
        let needs = signed_width(value);
        if needs <= width && width - needs <= WINDOW_SLACK {
            self.put(0b10, 2);
            self.put(value as u64 & mask(width.into()), width.into());
            return width;
        }
        self.put(0b11, 2);
        self.put(u64::from(needs - 1), 6);
        self.put(value as u64 & mask(needs.into()), needs.into());
        needs
    }
}

/// How many bits wider than a number its window may be.
const WINDOW_SLACK: u8 = 8;

/// The fewest bits of two's complement that hold `value`.
fn signed_width(value: i64) -> u8 {
    65 - (value ^ (value >> 63)).leading_zeros() as u8
}

/// Whether `value` is a `width`-bit two's complement number.
fn fits(value: i64, width: u32) -> bool {
    let half = 1i64 << (width - 1);
    (-half..half).contains(&value)
}

fn mask(width: u32) -> u64 {
    match width {
        64 => u64::MAX,
        width => (1u64 << width) - 1,
    }
}

/// A chunk's times as they are decoded: changes of interval in `unit`s
/// (ns), told in units of `per` ns.
struct Times {
    unit: i64,
    per: i64,
    /// `unit / per` where that is whole.
    scale: Option<i64>,
    ticks: i64,
    delta: i64,
}

impl Times {
    #[inline(always)]
    fn now(&self) -> i64 {
        match self.scale {
            Some(scale) => self.ticks * scale,
            None => (self.ticks * self.unit).div_euclid(self.per),
        }
    }

    /// The next time, its change of interval read from `reader`.
    #[inline(always)]
    fn next(&mut self, reader: &mut Reader<'_>) -> i64 {
        self.delta = self.delta.wrapping_add(reader.take_signed());
        self.ticks = self.ticks.wrapping_add(self.delta);
        self.now()
    }
}

/// Reads a [`Bits`] stream, a word at a time.
struct Reader<'a> {
    bytes: &'a [u8],
    /// The next byte not yet in `buffer` whole.
    next: usize,
    /// The next bits, from the most significant down; those past `held`
    /// are zero or the very bits that follow (a byte loaded in part).
    buffer: u64,
    held: u32,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            next: 0,
            buffer: 0,
            held: 0,
        }
    }

    /// Loads whole bytes until at least 56 bits are held (zeros past the
    /// end).
    #[inline(always)]
    fn refill(&mut self) {
        match self.bytes.get(self.next..self.next + 8) {
            Some(word) => {
                let word = u64::from_be_bytes(word.try_into().expect("8 bytes"));
                self.buffer |= word >> self.held;
                let whole = (63 - self.held) / 8;
                self.next += whole as usize;
                self.held += whole * 8;
            }
            None => {
                while self.held <= 56 {
                    let byte = self.bytes.get(self.next).copied().unwrap_or(0);
                    self.buffer |= u64::from(byte) << (56 - self.held);
                    self.next += 1;
                    self.held += 8;
                }
            }
        }
    }

    /// The next `width` (1 to 64) bits.
    #[inline(always)]
    fn take(&mut self, width: u32) -> u64 {
        if width > 56 {
            return self.take_wide(width);
        }
        debug_assert!(width > 0, "every field is a bit or more");
        if width > self.held {
            self.refill();
        }
        let bits = self.buffer >> (64 - width);
        self.buffer <<= width;
        self.held -= width;
        bits
    }

    /// [`take`](Self::take) of more than 56 bits: two parts.
    #[cold]
    fn take_wide(&mut self, width: u32) -> u64 {
        let high = self.take(32);
        high << (width - 32) | self.take(width - 32)
    }

    /// The next signed number in its [`BUCKETS`] width.
    #[inline(always)]
    fn take_signed(&mut self) -> i64 {
        if self.held < BUCKETS.len() as u32 {
            self.refill();
        }
        // The prefix: a `1` per bucket passed, a `0` unless all are.
        let bucket = (self.buffer.leading_ones() as usize).min(BUCKETS.len());
        self.take((bucket + usize::from(bucket < BUCKETS.len())) as u32);
        match bucket {
            0 => 0,
            _ => self.take_extended(BUCKETS[bucket - 1]),
        }
    }

    /// The next `width` bits, a two's complement number.
    #[inline(always)]
    fn take_extended(&mut self, width: u32) -> i64 {
        let shift = 64 - width;
        ((self.take(width) << shift) as i64) >> shift
    }

    /// The usual sample of a decimal chunk in one look, if it is next: its
    /// interval unchanged (`0`) and its value unchanged (`0`) or changed
    /// by a number in the last one's `width` bits (`10`, the number).
    /// Returns that change; `None` (nothing read) for any other sample.
    #[inline(always)]
    fn take_steady(&mut self, width: u8) -> Option<i64> {
        if self.held < 40 {
            self.refill();
        }
        let (bits, width) = (self.buffer, u32::from(width));
        let (used, change) = match bits >> 61 {
            0b000 | 0b001 => (2, 0),
            0b010 if width > 0 => (3 + width, ((bits << 3) as i64) >> (64 - width)),
            _ => return None,
        };
        if used > self.held {
            return None;
        }
        self.buffer = self.buffer.checked_shl(used).unwrap_or(0);
        self.held -= used;
        Some(change)
    }

    /// The next number written by [`Bits::put_windowed`] after one in
    /// `width` bits, and its width.
    #[inline(always)]
    fn take_windowed(&mut self, width: u8) -> (i64, u8) {
        if self.take(1) == 0 {
            return (0, width);
        }
        let width = match self.take(1) {
            0 => width,
            _ => self.take(6) as u8 + 1,
        };
        (self.take_extended(width.into()), width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(samples: &[(i64, f64)]) -> Open {
        let chunk = Open::encode(samples);
        let decoded = chunk.view().decode();
        assert_eq!(decoded.len(), samples.len());
        for (got, want) in decoded.iter().zip(samples) {
            assert_eq!(got.0, want.0);
            assert_eq!(got.1.to_bits(), want.1.to_bits(), "{} != {}", got.1, want.1);
        }
        chunk
    }

    #[test]
    fn a_scraped_counter_costs_the_width_of_its_rises_and_a_few_bits() {
        // 15 s scrapes in ms with a little jitter, a CPU counter of ticks
        // over 100 rising 600 to 1200 ticks a scrape: 12 bits of value and
        // 2 of prefix, time 1 to 5 bits, the first sample 16 bytes.
        let mut ticks = 123_456_789u64;
        let samples: Vec<(i64, f64)> = (0..240)
            .map(|i| {
                ticks += 600 + (i * 7919 % 600) as u64;
                let jitter = [0, 1, 0, -2, 0, 0][i % 6];
                let ms = 1_700_000_000_000 + i as i64 * 15_000 + jitter;
                (ms * 1_000_000, ticks as f64 / 100.0)
            })
            .collect();
        let chunk = round_trip(&samples);
        assert_eq!(chunk.head.unit, 1, "ms");
        assert_eq!(Values::from_tag(chunk.head.values), Values::Decimal(2));
        let per_sample = chunk.close().bytes() as f64 / samples.len() as f64;
        assert!(per_sample < 2.5, "{per_sample} bytes a sample");
    }

    #[test]
    fn a_constant_gauge_at_a_steady_pace_costs_two_bits_a_sample() {
        let samples: Vec<(i64, f64)> = (0..240).map(|i| (i * 15_000_000_000, 8.0e9)).collect();
        let chunk = round_trip(&samples);
        assert_eq!(chunk.head.unit, 0, "s");
        // The first interval costs a byte, the rest a bit of time and
        // one of value.
        assert_eq!(
            chunk.close().bytes(),
            16 + (8 + 1 + 238 * 2usize).div_ceil(8)
        );
    }

    #[test]
    fn floats_that_are_no_decimals_keep_their_bits() {
        let stale = f64::from_bits(0x7ff0_0000_0000_0002);
        let samples = [
            (1, 0.1 + 0.2),
            (2, -0.0),
            (3, stale),
            (4, f64::INFINITY),
            (5, 1.0 / 3.0),
            (7, 1.0 / 3.0),
            (1_000_000_000_000, f64::MIN_POSITIVE),
        ];
        let chunk = round_trip(&samples);
        assert_eq!(Values::from_tag(chunk.head.values), Values::Xor);
    }

    #[test]
    fn a_push_the_chunk_cannot_hold_writes_nothing() {
        let mut chunk = Open::encode(&[(1_000_000_000, 1.5)]);
        assert!(!chunk.push(1_000_000_000, 2.0), "not after the last");
        assert!(!chunk.push(1_500_000_000, 2.0), "not in whole seconds");
        assert!(!chunk.push(2_000_000_000, 1.0 / 3.0), "not a decimal");
        assert!(!chunk.push(2_000_000_000, 2.25), "more places than 1.5");
        assert!(chunk.push(2_000_000_000, 2.5));
        let full = chunk.close();
        assert_eq!(
            full.view().decode(),
            [(1_000_000_000, 1.5), (2_000_000_000, 2.5)]
        );
        // 16 bytes for the first, 8 bits of time, 2 + 6 + 5 of value.
        assert_eq!(full.bytes(), 16 + 3);
    }

    #[test]
    fn a_gauge_of_pages_leaves_out_the_zero_bits_of_its_changes() {
        // Memory in bytes, moving by up to 8 MiB either way in pages of
        // 4096: 12 bits of change and a prefix, not 24.
        let mut bytes = 8u64 << 30;
        let samples: Vec<(i64, f64)> = (0..240)
            .map(|i| {
                bytes = bytes - (8 << 20) + (i * 7919 % 4096) * 4096;
                (i as i64 * 15_000_000_000, bytes as f64)
            })
            .collect();
        let chunk = round_trip(&samples);
        assert_eq!(chunk.head.shift, 12);
        let per_sample = chunk.close().bytes() as f64 / samples.len() as f64;
        assert!(per_sample < 2.5, "{per_sample} bytes a sample");
        // Appended one by one: the first change that is not 0 decides,
        // one with fewer zero bits is refused (the caller encodes again).
        const S: i64 = 1_000_000_000;
        let mut open = Open::encode(&[(0, 4096.0)]);
        assert!(open.push(S, 4096.0));
        assert_eq!(open.head.shift, UNDECIDED);
        assert!(open.push(2 * S, 20480.0), "a change of 4 pages");
        assert_eq!(open.head.shift, 14);
        assert!(!open.push(3 * S, 40960.0), "a change of 5 pages");
        assert!(open.push(3 * S, 53248.0), "a change of 8 pages");
        assert_eq!(
            open.view().decode(),
            [(0, 4096.0), (S, 4096.0), (2 * S, 20480.0), (3 * S, 53248.0)]
        );
    }

    /// Samples `steps` apart (each a time step and a value) after `start`.
    fn stepped(start: i64, steps: Vec<(i64, f64)>) -> Vec<(i64, f64)> {
        let mut time = start;
        steps
            .into_iter()
            .map(|(step, value)| {
                time += step;
                (time, value)
            })
            .collect()
    }

    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>(),
            (-1_000_000i64..1_000_000, 0u8..4).prop_map(|(m, e)| m as f64 / POW10[e as usize]),
            (-1_000_000i64..1_000_000, 0u32..40).prop_map(|(m, zeros)| (m << zeros) as f64),
            Just(0.0),
        ]
    }

    proptest! {
        #[test]
        fn any_samples_decode_to_their_bits(
            steps in prop::collection::vec((1i64..1 << 40, value()), 0..300),
            start in any::<i32>(),
        ) {
            round_trip(&stepped(i64::from(start) * 1_000_000, steps));
        }

        #[test]
        fn samples_appended_one_by_one_decode_as_encoded_at_once(
            steps in prop::collection::vec((1i64..1 << 20, value()), 1..300),
        ) {
            let samples = stepped(0, steps);
            // As a series appends: a refused sample encodes the chunk again.
            let mut open = Open::encode(&samples[..1]);
            for (i, &(time, value)) in samples.iter().enumerate().skip(1) {
                if !open.push(time, value) {
                    open = Open::encode(&samples[..=i]);
                }
            }
            let appended = open.view().decode();
            let at_once = round_trip(&samples).view().decode();
            let bits = |samples: &[(i64, f64)]| -> Vec<(i64, u64)> {
                samples.iter().map(|&(t, v)| (t, v.to_bits())).collect()
            };
            prop_assert_eq!(bits(&appended), bits(&at_once));
        }
    }
}
