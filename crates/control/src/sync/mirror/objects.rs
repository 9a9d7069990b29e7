//! Routes through nexthop objects ([`NhDef`]): how the mirror resolves them, follows the
//! objects' changes, and keeps a resilient group's buckets where they were.
//!
//! Why the mirror keeps its own bucket table for a resilient group rather than the kernel's:
//! the data plane hashes flows its own way, so the kernel's table would not put a flow on the
//! path the kernel gives it anyway. What a resilient group promises is that a change moves as
//! few flows as it must: when a member leaves, only its buckets change hands; when one joins
//! or a weight changes, only as many buckets as the new shares need. [`rebalance`] keeps that
//! from one version of the group to the next. Unlike the kernel it moves them at once, with
//! no idle or unbalanced timer.

use std::collections::HashMap;

use vrhost_fib::Family;

use super::{Fam, Hop, KRoute, NhDef, RouteKind};

/// The mirror's nexthop objects, for resolving routes.
#[derive(Clone, Copy)]
pub(super) struct Objects<'a> {
    /// By id.
    pub(super) defs: &'a HashMap<u32, NhDef>,
    /// A resilient group's member id per bucket.
    pub(super) res: &'a HashMap<u32, Vec<u32>>,
}

/// A route's next hops, resolved.
#[derive(Default)]
pub(super) struct Resolved<'a> {
    /// Each with the id of the object it came from (0 for a route's own next hops).
    pub(super) hops: Vec<(Hop, u32)>,
    /// A resilient group's bucket table (member ids).
    pub(super) buckets: Option<&'a [u32]>,
}

impl<'a> Objects<'a> {
    /// What route `k` does and through which next hops. Through its nexthop object when
    /// the mirror has that: a unicast route over the object's next hops (a group's members
    /// with their weights), or a blackhole for a blackhole object, whatever kind the route
    /// was announced as (the kernel marks it a blackhole only when it is added or dumped).
    /// Else the route's own kind and next hops.
    pub(super) fn resolve(&self, k: &KRoute) -> (RouteKind, Resolved<'a>) {
        let Some((id, def)) = k.nh.and_then(|id| Some((id, self.defs.get(&id)?))) else {
            let hops = k.hops.iter().map(|h| (*h, 0)).collect();
            return (
                k.kind,
                Resolved {
                    hops,
                    buckets: None,
                },
            );
        };
        let unicast = |hops| {
            let buckets = None;
            (RouteKind::Unicast, Resolved { hops, buckets })
        };
        let members = match def {
            NhDef::One(h) => return unicast(vec![(*h, id)]),
            NhDef::Blackhole => return (RouteKind::Blackhole, Resolved::default()),
            NhDef::Other => return unicast(Vec::new()),
            NhDef::Group(m) | NhDef::Resilient(m, _) => m,
        };
        // The FIB takes weights up to 256; larger ones (16-bit group weights) are scaled
        // down in proportion, none below 1.
        let max = members.iter().map(|&(_, w)| w).max().unwrap_or(1);
        let top = u32::from(vrhost_fib::MAX_WEIGHT);
        let hops = members
            .iter()
            .filter_map(|&(m, w)| match self.defs.get(&m) {
                Some(NhDef::One(h)) => {
                    let w = if max > top {
                        (u64::from(w) * u64::from(top) / u64::from(max)).max(1) as u32
                    } else {
                        w
                    };
                    Some((
                        Hop {
                            weight: w as u16,
                            ..*h
                        },
                        m,
                    ))
                }
                _ => None,
            })
            .collect();
        let buckets = match def {
            NhDef::Resilient(..) => self.res.get(&id).map(Vec::as_slice),
            _ => None,
        };
        (RouteKind::Unicast, Resolved { hops, buckets })
    }
}

/// A resilient group's bucket table after its members (ids, weights) changed, from the one
/// before (`old`, if it had as many buckets). Each member's quota is its weight's share of
/// the `n` buckets, the rounding going to the largest remainders (then the first members). A
/// bucket keeps its member while that member is still in the group and within its quota;
/// the others go, in order, to the members short of theirs.
pub(super) fn rebalance(old: Option<&[u32]>, members: &[(u32, u32)], n: usize) -> Vec<u32> {
    let total: u64 = members.iter().map(|&(_, w)| u64::from(w)).sum();
    if total == 0 || n == 0 {
        return Vec::new();
    }
    let n64 = n as u64;
    let mut quota: Vec<u64> = members
        .iter()
        .map(|&(_, w)| n64 * u64::from(w) / total)
        .collect();
    let mut by_rest: Vec<usize> = (0..members.len()).collect();
    by_rest.sort_by_key(|&i| core::cmp::Reverse(n64 * u64::from(members[i].1) % total));
    let short = n64 - quota.iter().sum::<u64>();
    for &i in by_rest.iter().take(short as usize) {
        quota[i] += 1;
    }
    let index: HashMap<u32, usize> = members.iter().enumerate().map(|(i, m)| (m.0, i)).collect();
    let mut table: Vec<Option<usize>> = vec![None; n];
    if let Some(old) = old.filter(|o| o.len() == n) {
        for (slot, id) in table.iter_mut().zip(old) {
            if let Some(&i) = index.get(id)
                && quota[i] > 0
            {
                quota[i] -= 1;
                *slot = Some(i);
            }
        }
    }
    let mut next = 0;
    for slot in table.iter_mut().filter(|s| s.is_none()) {
        while quota[next] == 0 {
            next += 1;
        }
        quota[next] -= 1;
        *slot = Some(next);
    }
    table
        .into_iter()
        .map(|i| members[i.expect("every bucket filled")].0)
        .collect()
}

/// The FIB's bucket table (member indexes) for a resilient group's `table` (member ids),
/// given where each usable member landed in the set (`place`: id, index). A bucket whose
/// member cannot be used now (dead, its tap down) goes to the usable members in turn; the
/// others keep theirs, so their flows do not move.
pub(super) fn buckets(table: &[u32], place: &[(u32, usize)]) -> Vec<u8> {
    let mut turn = 0;
    table
        .iter()
        .map(|id| match place.iter().find(|(m, _)| m == id) {
            Some(&(_, i)) => i as u8,
            None => {
                let i = place.get(turn % place.len().max(1)).map_or(0, |&(_, i)| i);
                turn += 1;
                i as u8
            }
        })
        .collect()
}

/// Mark the prefixes using nexthop object `id` dirty, forgetting those that no longer do.
pub(super) fn dirty_nh_users<F: Family>(fam: &mut Fam<F>, id: u32) {
    let Some(users) = fam.nh_users.get_mut(&id) else {
        return;
    };
    let routes = &fam.routes;
    users.retain(|p| {
        routes
            .get(p)
            .is_some_and(|l| l.iter().any(|k| k.nh == Some(id)))
    });
    fam.dirty.extend(users.iter().copied());
    if users.is_empty() {
        fam.nh_users.remove(&id);
    }
}

/// Nexthop object `id` was deleted: so are the routes that used it (the kernel sends no
/// route message for them).
pub(super) fn drop_nh_routes<F: Family>(fam: &mut Fam<F>, id: u32) {
    let Some(users) = fam.nh_users.remove(&id) else {
        return;
    };
    for p in users {
        if let Some(list) = fam.routes.get_mut(&p) {
            list.retain(|k| k.nh != Some(id));
            if list.is_empty() {
                fam.routes.remove(&p);
            }
            fam.dirty.insert(p);
        }
    }
}
