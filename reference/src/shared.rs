//! Persistent (structurally shared) containers for the model's state and id books.
//!
//! A checker keeps every state the broker may be in, and explores each request on a
//! copy of each of them; a linearizability search copies them again for every call it
//! tries next and remembers the states it has seen. With plain `Vec`s and maps every
//! copy cost the whole history (all messages, all writes, every id learnt), and copying
//! and dropping was nearly all of a checker's time. The logs and maps that grow with the
//! history are therefore persistent ([`imbl`]): a copy is O(1) and shares everything,
//! and a change copies only the few nodes on its path, so a step costs what it touches.
//!
//! Sharing also makes comparing two states cheap when they descend from one another:
//! `same_log` skips the leaves two logs still share instead of comparing every element.

use std::sync::Arc;

/// An append-mostly sequence shared between copies (an RRB tree).
pub(crate) type Log<T> = imbl::Vector<T>;

/// An ordered map shared between copies (a B-tree).
pub(crate) type OrdMap<K, V> = imbl::OrdMap<K, V>;

/// A hash map shared between copies (a HAMT), hashed with FxHash like the rest of the model.
pub(crate) type HashMap<K, V> =
    imbl::GenericHashMap<K, V, rustc_hash::FxBuildHasher, imbl::shared_ptr::DefaultSharedPtr>;

/// Whether two logs hold equal elements (by `eq`), without looking inside the leaves
/// they share: O(leaves) for two copies of one log that differ in a few places.
pub(crate) fn same_log<T>(a: &Log<T>, b: &Log<T>, eq: impl Fn(&T, &T) -> bool) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.ptr_eq(b) {
        return true;
    }
    let (mut la, mut lb) = (a.leaves(), b.leaves());
    loop {
        match (la.next(), lb.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) if x.len() == y.len() => {
                let shared = std::ptr::eq(x.as_ptr(), y.as_ptr());
                if !shared && !x.iter().zip(y).all(|(p, q)| eq(p, q)) {
                    return false;
                }
            }
            // Leaves cut at different places: compare element by element.
            _ => return a.iter().zip(b.iter()).all(|(p, q)| eq(p, q)),
        }
    }
}

/// Whether two shared values are equal, without comparing a value with itself.
pub(crate) fn same_arc<T: PartialEq>(a: &Arc<T>, b: &Arc<T>) -> bool {
    Arc::ptr_eq(a, b) || **a == **b
}

/// Whether two hash maps are equal, without comparing a map with itself (imbl's own
/// comparison builds a set of every key).
pub(crate) fn same_map<K, V, S>(
    a: &imbl::GenericHashMap<K, V, S, imbl::shared_ptr::DefaultSharedPtr>,
    b: &imbl::GenericHashMap<K, V, S, imbl::shared_ptr::DefaultSharedPtr>,
) -> bool
where
    K: std::hash::Hash + Eq + Clone,
    V: PartialEq + Clone,
    S: std::hash::BuildHasher + Clone,
{
    a.ptr_eq(b) || (a.len() == b.len() && a.iter().all(|(k, v)| b.get(k) == Some(v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_compare_by_content_whatever_they_share() {
        let a: Log<u32> = (0..1000).collect();
        let mut b = a.clone();
        assert!(same_log(&a, &b, |x, y| x == y));
        b.set(700, 7);
        assert!(!same_log(&a, &b, |x, y| x == y));
        b.set(700, 700);
        assert!(same_log(&a, &b, |x, y| x == y));
        // Built apart: nothing shared, same content.
        let c: Log<u32> = (0..1000).collect();
        assert!(same_log(&a, &c, |x, y| x == y));
        let mut d = c.clone();
        d.push_back(1000);
        assert!(!same_log(&a, &d, |x, y| x == y));
        // Leaves cut elsewhere (pushed at the front).
        let mut e: Log<u32> = (1..1000).collect();
        e.push_front(0);
        assert!(same_log(&a, &e, |x, y| x == y));
        e.set(999, 0);
        assert!(!same_log(&a, &e, |x, y| x == y));
        // Joined from two halves: leaves of other lengths all along.
        let mut f: Log<u32> = (0..50).collect();
        f.append((50..100).collect());
        f.append((100..1000).collect());
        assert!(same_log(&a, &f, |x, y| x == y));
        assert!(same_log(&f, &a, |x, y| x == y));
    }

    #[test]
    fn maps_compare_by_content() {
        let mut a: HashMap<String, u32> = HashMap::default();
        a.insert("x".into(), 1);
        let mut b = a.clone();
        assert!(same_map(&a, &b));
        b.insert("y".into(), 2);
        assert!(!same_map(&a, &b));
        let mut c: HashMap<String, u32> = HashMap::default();
        c.insert("x".into(), 1);
        assert!(same_map(&a, &c));
        c.insert("x".into(), 2);
        assert!(!same_map(&a, &c));
    }
}
