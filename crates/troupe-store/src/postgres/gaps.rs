//! Ids missing from the event log, for readers that resume from an id.
//!
//! On PostgreSQL event ids do not commit in id order (no lock orders the
//! writers, `V18_EVENTS_WITHOUT_GLOBAL_ORDER`): a transaction may commit id
//! 9 while another still holds 8. A reader returns events in id order and
//! never passes a missing id that may still appear. The argument:
//!
//! 1. Every transaction takes the shared advisory lock `EVENT_WRITERS`
//!    before it draws an event id and holds it until it ends (shared: no
//!    writer waits for another).
//! 2. A reader sees id `g` missing below a visible id `v` in a snapshot `S`.
//!    Ids are drawn in order (one sequence, no cache), so `g`'s holder drew
//!    it before `v` was drawn, hence before `v` committed, before `S`: it held
//!    the lock before `S` and had not committed at `S`. So it had either
//!    ended (rolled back: `g` never appears) or was in flight, holding it.
//! 3. After `S` the reader reads the lock's holders now (`L`, by virtual
//!    transaction id, in `pg_locks`). `g`'s holder, if it can still commit
//!    `g`, is in `L`. `g` is *pending* on `L`.
//! 4. A later look that finds no id of `L` running makes `g` *final*: a read
//!    after that look sees `g` if its holder committed, and an id it does not
//!    see never appears. An empty `L` makes `g` final at once.
//!
//! A reader delivers ids in order up to the first missing id that is not
//! final: nothing is skipped, nothing is delivered twice (its cursor only
//! grows), and a rolled-back id holds it only until the transactions in
//! flight when it was first seen have ended. The knowledge is shared by the
//! store's readers; forgetting it is always safe (an id is then looked at
//! again), which bounds its size.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// More entries than this and the store forgets them all (see the module doc).
const MOST: usize = 10_000;

/// What a store's readers know about missing ids.
#[derive(Debug, Default)]
pub(crate) struct Gaps {
    /// Missing ids that may still appear, with the transactions in flight when each was first seen.
    pending: BTreeMap<i64, Arc<[String]>>,
    /// Missing ids that never appear.
    gone: BTreeSet<i64>,
    /// Every id up to this one is visible or gone (`last_event_id`).
    pub(crate) horizon: i64,
}

/// A page of visible ids read against what is known.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Walk {
    /// How many of the ids may be delivered: those before the first missing id that is not gone.
    pub(crate) deliver: usize,
    /// Missing ids below the page's last id seen for the first time.
    pub(crate) new: Vec<i64>,
}

impl Gaps {
    /// Read the visible ids `ids` (sorted, all above `after`) as a reader resuming after `after`.
    pub(crate) fn walk(&mut self, after: i64, ids: &[i64]) -> Walk {
        let mut next = after.max(0) + 1;
        let mut deliver = None;
        let mut new = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            // Visible now: nothing to remember about it.
            self.pending.remove(&id);
            self.gone.remove(&id);
            for missing in next..id {
                if self.gone.contains(&missing) {
                    continue;
                }
                deliver.get_or_insert(i);
                if !self.pending.contains_key(&missing) {
                    new.push(missing);
                }
            }
            next = next.max(id + 1);
        }
        Walk { deliver: deliver.unwrap_or(ids.len()), new }
    }

    /// Record ids first seen missing, with the transactions `running` after the read that saw them.
    pub(crate) fn record(&mut self, ids: &[i64], running: &HashSet<String>) {
        if self.pending.len() + self.gone.len() + ids.len() > MOST {
            self.pending.clear();
            self.gone.clear();
        }
        if running.is_empty() {
            self.gone.extend(ids);
            return;
        }
        let holders: Arc<[String]> = running.iter().cloned().collect();
        for &id in ids {
            self.pending.insert(id, holders.clone());
        }
    }

    /// Whether a missing id above `after` may still appear.
    pub(crate) fn pending_after(&self, after: i64) -> bool {
        self.pending.range(after + 1..).next().is_some()
    }

    /// Make gone every pending id none of whose transactions is among those `running` now.
    pub(crate) fn settle(&mut self, running: &HashSet<String>) {
        let gone: Vec<i64> = self
            .pending
            .iter()
            .filter(|(_, holders)| !holders.iter().any(|x| running.contains(x)))
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            self.pending.remove(&id);
            self.gone.insert(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(xids: &[&str]) -> HashSet<String> {
        xids.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn contiguous_ids_are_all_delivered() {
        let mut gaps = Gaps::default();
        assert_eq!(gaps.walk(0, &[1, 2, 3]), Walk { deliver: 3, new: vec![] });
        assert_eq!(gaps.walk(5, &[]), Walk { deliver: 0, new: vec![] });
    }

    #[test]
    fn a_reader_stops_before_a_new_gap_and_reports_every_new_one() {
        let mut gaps = Gaps::default();
        assert_eq!(gaps.walk(1, &[2, 5, 7]), Walk { deliver: 1, new: vec![3, 4, 6] });
    }

    #[test]
    fn a_pending_gap_holds_readers_until_its_transactions_end() {
        let mut gaps = Gaps::default();
        gaps.record(&[3], &set(&["100", "101"]));
        assert_eq!(gaps.walk(1, &[2, 4]), Walk { deliver: 1, new: vec![] }, "seen, still pending");
        assert!(gaps.pending_after(2));
        gaps.settle(&set(&["101", "102"]));
        assert_eq!(gaps.walk(1, &[2, 4]), Walk { deliver: 1, new: vec![] }, "101 still runs");
        gaps.settle(&set(&["102"]));
        assert!(!gaps.pending_after(0));
        assert_eq!(gaps.walk(1, &[2, 4]), Walk { deliver: 2, new: vec![] }, "rolled back: passed");
    }

    #[test]
    fn with_nothing_in_flight_a_gap_is_gone_at_once() {
        let mut gaps = Gaps::default();
        gaps.record(&[3], &HashSet::new());
        assert_eq!(gaps.walk(0, &[1, 2, 4]), Walk { deliver: 3, new: vec![] });
    }

    #[test]
    fn an_id_that_appears_is_delivered_and_forgotten() {
        let mut gaps = Gaps::default();
        gaps.record(&[3], &set(&["100"]));
        assert_eq!(gaps.walk(2, &[3, 4]), Walk { deliver: 2, new: vec![] });
        assert!(!gaps.pending_after(0));
        gaps.record(&[5], &HashSet::new());
        assert_eq!(gaps.walk(4, &[5]), Walk { deliver: 1, new: vec![] });
        assert!(gaps.gone.is_empty());
    }

    #[test]
    fn too_much_to_remember_is_forgotten_which_is_safe() {
        let mut gaps = Gaps::default();
        let many: Vec<i64> = (1..=MOST as i64).collect();
        gaps.record(&many, &HashSet::new());
        assert_eq!(gaps.walk(0, &[MOST as i64 + 1]).deliver, 1, "all gone");
        gaps.record(&[MOST as i64 + 5], &set(&["1"]));
        assert_eq!(gaps.walk(0, &[3]), Walk { deliver: 0, new: vec![1, 2] }, "looked at again");
    }
}
