//! Per-series work of a read on every core: decoding many series' samples,
//! a range function over each of them. One pool of a thread per core for
//! the process (rayon's global pool); a job too small to gain from it
//! stays on the calling thread, since handing work to the pool and waiting
//! for it costs tens of microseconds.

use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};

/// Sets the pool's threads (0: one per core) unless it has started; the
/// first ingestor opened in the process sets it. Whether it was set.
pub(crate) fn set_threads(threads: usize) -> bool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("chingest-eval-{i}"))
        .build_global()
        .is_ok()
}

/// `each` of every item, in the items' order: spread over the pool in runs
/// of `min_each` items at least when there are two such runs or more, else
/// on the calling thread. `min_each` is how many items are worth a task.
/// (Borrowed items come as a list of references.)
pub fn map<T: Send, R: Send>(
    items: Vec<T>,
    min_each: usize,
    each: impl Fn(T) -> R + Sync + Send,
) -> Vec<R> {
    let min_each = min_each.max(1);
    if items.len() < 2 * min_each {
        return items.into_iter().map(each).collect();
    }
    items
        .into_par_iter()
        .with_min_len(min_each)
        .map(each)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order_whether_spread_or_not() {
        let items: Vec<u64> = (0..1_000).collect();
        let square = |x: u64| x * x;
        let want: Vec<u64> = items.iter().map(|&x| square(x)).collect();
        assert_eq!(map(items.clone(), 10, square), want);
        assert_eq!(map(items.clone(), 1_000, square), want);
        assert_eq!(
            map(items[..3].iter().collect(), 1, |&x| square(x)),
            want[..3]
        );
        assert_eq!(map(Vec::<u64>::new(), 0, square), Vec::<u64>::new());
    }

    #[test]
    fn large_jobs_spread_over_the_pool_and_small_ones_stay_on_the_caller() {
        let caller = std::thread::current().id();
        let thread_of = |_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            std::thread::current().id()
        };
        let small = map((0..9).collect::<Vec<u32>>(), 5, thread_of);
        assert!(small.iter().all(|&t| t == caller));
        let large = map((0..64).collect::<Vec<u32>>(), 1, thread_of);
        let mut threads = large.clone();
        threads.sort_by_key(|t| format!("{t:?}"));
        threads.dedup();
        assert!(!large.contains(&caller));
        assert_eq!(threads.len() > 1, rayon::current_num_threads() > 1);
    }
}
