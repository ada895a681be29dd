//! Joining two possible states into one, when that loses nothing.
//!
//! A checker does not know the broker's "now" exactly, only an interval, and an
//! operation that compares it with a deadline in that interval splits it: one outcome for
//! each side. When the split decided nothing that shows (a pop walked past a lease that
//! may or may not have expired, and claimed elsewhere), the outcomes differ only in the
//! narrowed "now" they recorded, typically the deadline of the lease the call took. Kept
//! apart, such twins multiply with every call near a deadline until a search drowns in
//! them. Two states that differ in one lease's deadline alone, by intervals that overlap
//! or touch, say together exactly that the deadline lies in the intervals' hull, so one
//! state with the hull stands for both.

use super::state::{Partition, State};
use std::sync::Arc;

impl State {
    /// The one state that stands for both `self` and `other`, if they differ only in the
    /// deadline of one lease and its two intervals overlap or touch.
    pub(crate) fn joined(&self, other: &State) -> Option<State> {
        let (mine, theirs) = (&self.partitions, &other.partitions);
        if mine.len() != theirs.len() {
            return None;
        }
        let mut differing = None;
        for (i, (a, b)) in mine.iter().zip(theirs.iter()).enumerate() {
            match (a, b) {
                (Some(a), Some(b)) if Arc::ptr_eq(a, b) || a == b => {}
                (None, None) => {}
                (Some(_), Some(_)) if differing.is_none() => differing = Some(i),
                _ => return None,
            }
        }
        let i = differing?;
        let (a, b) = (mine[i].as_deref()?, theirs[i].as_deref()?);
        let part = Arc::new(a.joined(b)?);
        let mut joined = self.clone();
        let mut twin = other.clone();
        Arc::make_mut(&mut joined.partitions)[i] = Some(part.clone());
        Arc::make_mut(&mut twin.partitions)[i] = Some(part);
        (joined == twin).then_some(joined)
    }
}

impl Partition {
    /// This partition with one lease's deadline widened to its hull with `other`'s, if
    /// that lease's deadline is all the two differ in.
    fn joined(&self, other: &Partition) -> Option<Partition> {
        let mut widened = None;
        for (group, mine) in &self.cursors {
            let theirs = other.cursors.get(group)?;
            if let (Some(x), Some(y)) = (&mine.lease, &theirs.lease) {
                if x.id == y.id && x.deadline != y.deadline {
                    if widened.is_some() {
                        return None;
                    }
                    widened = Some((group, x.deadline.hull(&y.deadline)?));
                }
            }
        }
        let (group, hull) = widened?;
        let (mut a, mut b) = (self.clone(), other.clone());
        for p in [&mut a, &mut b] {
            if let Some(l) = p.cursors.get_mut(group).and_then(|c| c.lease.as_mut()) {
                l.deadline = hull;
            }
        }
        (a == b).then_some(a)
    }
}

#[cfg(test)]
mod tests {
    use crate::model::state::{Cursor, Lease, LeaseH, PartH, Partition, State};
    use crate::time::Stamp;
    use std::sync::Arc;

    fn with_lease(deadline: Stamp) -> State {
        let mut s = State::default();
        let mut p = Partition {
            handle: PartH(0),
            queue: "q".into(),
            name: "p".into(),
            messages: Default::default(),
            txn_index: Default::default(),
            cursors: Default::default(),
            last_write: None,
            floor: 0,
            deleted: Default::default(),
        };
        p.cursors.insert(
            "g".into(),
            Cursor {
                lease: Some(Lease {
                    id: LeaseH(1),
                    end: 1,
                    deadline,
                    duration_ms: 1000,
                }),
                ..Cursor::default()
            },
        );
        Arc::make_mut(&mut s.partitions).push(Some(Arc::new(p)));
        s
    }

    fn deadline(s: &State) -> Stamp {
        let p = s.partitions[0].as_ref().unwrap();
        p.cursors["g"].lease.as_ref().unwrap().deadline
    }

    #[test]
    fn states_differing_in_one_deadline_join_to_its_hull() {
        let a = with_lease(Stamp::between(62, 72));
        let b = with_lease(Stamp::between(70, 80));
        let j = a.joined(&b).expect("they join");
        assert_eq!(deadline(&j), Stamp::between(62, 80));
        let touching = with_lease(Stamp::between(73, 75));
        assert_eq!(
            deadline(&a.joined(&touching).unwrap()),
            Stamp::between(62, 75)
        );
    }

    #[test]
    fn disjoint_deadlines_or_other_differences_do_not_join() {
        let a = with_lease(Stamp::between(62, 72));
        assert_eq!(a.joined(&with_lease(Stamp::between(74, 80))), None, "a gap");
        let mut b = with_lease(Stamp::between(70, 80));
        let p = Arc::make_mut(Arc::make_mut(&mut b.partitions)[0].as_mut().unwrap());
        p.cursors.get_mut("g").unwrap().committed = 1;
        assert_eq!(a.joined(&b), None, "a cursor that moved");
        assert_eq!(a.joined(&a.clone()), None, "equal states are not a join");
    }
}
