//! What the kernel of one VR's namespace holds — links, addresses, main-table routes,
//! neighbours — and what that means for the VR's FIBs and neighbour table.
//!
//! Why a mirror of the kernel's state rather than translating each message straight into a
//! FIB call: the kernel may hold several routes for one prefix (different metrics; IPv4
//! `ip route append`; IPv6 multipath siblings that come and go one next hop at a time), while
//! the FIB holds one next-hop set per prefix. Only with the kernel's whole entry at hand can a
//! deleted route be replaced by the next best one. The mirror is plain data fed with
//! [`Event`]s (made from netlink messages by [`super::nl`]), so it is tested without a kernel.
//!
//! The rules, as the kernel forwards:
//! - an address on any interface of the namespace makes itself (and, for IPv4 up to /30, its
//!   subnet's broadcast address; for IPv6 below /127, its subnet-router anycast address)
//!   **local** — punted to the namespace — exactly the routes
//!   `Dataplane::add_vif` installs for a VIF's configured addresses. Local beats every main
//!   table route, as the kernel's `local` table is consulted first. Loopback addresses
//!   (`127.0.0.0/8`, `::1`) are not mirrored: nothing outside may reach them;
//! - the subnet route of an address comes from the main table, where the kernel puts it
//!   (`proto kernel scope link`), so a route an operator deletes there is gone here too;
//! - of a prefix's main-table routes the lowest metric wins, then the first added (IPv4
//!   `append` queues behind); a multipath route is an ECMP set;
//! - next hops through a tap that is down, or flagged dead, are left out; and when a link
//!   goes down, what the kernel then deletes without a message — IPv4 routes all of whose
//!   next hops use it, nexthop objects through it — goes here too, for good
//!   (`Mirror::link_down`); so do its IPv4 routes when its last IPv4 address goes;
//! - routes through nexthop objects (`ip route … nhid N`, as FRR installs them) take the
//!   objects' next hops, and follow them as they change ([`super::nexthop`]);
//! - a route none of whose next hops goes through a VIF's tap (a dummy or tunnel inside the
//!   namespace, `lo`) cannot be forwarded by the data plane: it is not installed, and it is
//!   counted ([`Mirror::unusable`]) and logged. Packets follow the next covering route, as
//!   VPP's linux-cp does with routes through interfaces it does not mirror;
//! - link-local and multicast destinations (`fe80::/10`, `ff00::/8`, `224.0.0.0/4`) are never
//!   forwarded, so their routes are not mirrored; nor are source-specific or TOS routes, or
//!   kinds the data plane has no action for (`throw`, `nat`, …), which are counted as unusable.
//!
//! Incremental changes mark prefixes dirty; [`Mirror::apply`] recomputes only those.
//! [`Mirror::apply_all`] recomputes everything and diffs against what the FIB holds (start and
//! resync), so routes that did not change are not touched and forwarding on them never blinks.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use vrhost_dataplane::{IfAddr, IpPrefix, VifId, Vr};
use vrhost_fib::{Family, NextHop, NextHopSet, Prefix, Prefix4, Prefix6, Table, V4, V6};
use vrhost_wire::EthernetAddress;

use objects::{Objects, Resolved, dirty_nh_users, drop_nh_routes, rebalance};

/// One next hop of a kernel route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hop {
    /// `via` (may be of the other family: RFC 5549); none for a device route.
    pub gateway: Option<IpAddr>,
    /// `dev` (kernel ifindex).
    pub oif: u32,
    /// Flagged `dead` by the kernel.
    pub dead: bool,
    /// A multipath member's weight (`ip route … nexthop via ADDR weight W`, 1 to 256); 1
    /// for a single next hop.
    pub weight: u16,
}

/// What a route does (`ip route add TYPE …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// Forward through the next hops.
    Unicast,
    /// For the router itself.
    Local,
    /// Discard.
    Blackhole,
    /// Discard, ICMP unreachable.
    Unreachable,
    /// Discard, ICMP prohibited.
    Prohibit,
    /// Anything else (`throw`, `nat`, broadcast …): not forwarded by the data plane.
    Other(u8),
}

/// A route message (`RTM_NEWROUTE` / `RTM_DELROUTE`) reduced to what the mirror needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMsg {
    /// Destination.
    pub prefix: IpPrefix,
    /// Routing table.
    pub table: u32,
    /// Metric (`RTA_PRIORITY`).
    pub metric: u32,
    /// TOS (IPv4); non-zero routes are not mirrored.
    pub tos: u8,
    /// Source prefix length (IPv6 source routing); non-zero routes are not mirrored.
    pub src_len: u8,
    /// Type.
    pub kind: RouteKind,
    /// Next hops (one for a plain route, several for multipath, none for blackholes …). A
    /// route through a nexthop object has them only as the kernel's expansion of it (none
    /// with `nexthop_compat_mode` off).
    pub hops: Vec<Hop>,
    /// The nexthop object the route uses (`RTA_NH_ID`, `ip route … nhid N`).
    pub nh: Option<u32>,
    /// `NLM_F_APPEND` (IPv4: queue behind routes of the same metric).
    pub append: bool,
    /// `NLM_F_REPLACE` (IPv4: replace the first route of the same metric).
    pub replace: bool,
}

/// A nexthop object (`ip nexthop`; see [`super::nexthop`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NhDef {
    /// One next hop (its weight is 1).
    One(Hop),
    /// Discard.
    Blackhole,
    /// A group: member ids with their weights (1 to 65,536, as the kernel has them).
    Group(Vec<(u32, u32)>),
    /// A resilient group (`type resilient buckets N`): members as for [`NhDef::Group`], and
    /// its bucket count. The mirror keeps its own table of which member takes each bucket
    /// from one version of the group to the next ([`Mirror`]'s `res`), so that a member's
    /// leaving moves only its flows, as the kernel's table does for the kernel's.
    Resilient(Vec<(u32, u32)>, u16),
    /// A next hop the data plane does not forward by (encapsulated, FDB, without a device).
    Other,
}

impl NhDef {
    /// A group's members (ids, weights); none for a single next hop.
    fn members(&self) -> &[(u32, u32)] {
        match self {
            NhDef::Group(m) | NhDef::Resilient(m, _) => m,
            _ => &[],
        }
    }
}

/// A neighbour's state, as far as forwarding cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighState {
    /// The kernel has a MAC it would use (reachable, stale, delay, probe, permanent, noarp).
    Valid,
    /// Resolution pending or failed: no usable MAC.
    Invalid,
}

/// One kernel change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `RTM_NEWLINK`.
    Link {
        /// ifindex.
        index: u32,
        /// Name.
        name: String,
        /// Administratively up.
        up: bool,
        /// MTU.
        mtu: u32,
        /// Has a carrier (`IFF_LOWER_UP` or `IFF_RUNNING`).
        carrier: bool,
    },
    /// `RTM_DELLINK`.
    DelLink {
        /// ifindex.
        index: u32,
        /// Name.
        name: String,
    },
    /// `RTM_NEWADDR` / `RTM_DELADDR`.
    Addr {
        /// Deleted?
        deleted: bool,
        /// ifindex.
        index: u32,
        /// Address.
        addr: IpAddr,
        /// Prefix length.
        len: u8,
    },
    /// `RTM_NEWROUTE`.
    Route(RouteMsg),
    /// `RTM_DELROUTE`.
    DelRoute(RouteMsg),
    /// `RTM_NEWNEXTHOP`: a nexthop object added or replaced.
    Nexthop {
        /// Its id.
        id: u32,
        /// What it is.
        def: NhDef,
    },
    /// `RTM_DELNEXTHOP`: the kernel removed the object, and with it every route using it.
    DelNexthop {
        /// Its id.
        id: u32,
    },
    /// `RTM_NEWNEIGH` / `RTM_DELNEIGH`.
    Neigh {
        /// Deleted?
        deleted: bool,
        /// ifindex.
        index: u32,
        /// Address.
        addr: IpAddr,
        /// Link-layer address, if any.
        mac: Option<EthernetAddress>,
        /// State.
        state: NeighState,
    },
}

/// The main routing table's id.
pub const RT_TABLE_MAIN: u32 = 254;

#[derive(Debug, Clone, PartialEq, Eq)]
struct KRoute {
    metric: u32,
    kind: RouteKind,
    hops: Box<[Hop]>,
    nh: Option<u32>,
}

/// What happened to one prefix when it was recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Installed,
    Removed,
    Unchanged,
}

/// A link of the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Name.
    pub name: String,
    /// The VIF whose tap this is.
    pub vif: Option<VifId>,
    /// Administratively up.
    pub up: bool,
    /// MTU.
    pub mtu: u32,
    /// Has a carrier.
    pub carrier: bool,
}

/// Per-family state.
#[derive(Debug)]
struct Fam<F: Family> {
    /// Main-table routes per prefix, best first.
    routes: HashMap<Prefix<F>, Vec<KRoute>>,
    /// Local prefixes, with how many addresses make each.
    local: HashMap<Prefix<F>, u32>,
    dirty: HashSet<Prefix<F>>,
    /// Prefixes with routes the data plane cannot forward.
    unusable: HashSet<Prefix<F>>,
    /// Per nexthop object, the prefixes with a route that used it when added (some may have
    /// dropped it since: `dirty_nh_users` looks).
    nh_users: HashMap<u32, HashSet<Prefix<F>>>,
}

impl<F: Family> Default for Fam<F> {
    fn default() -> Self {
        Fam {
            routes: HashMap::new(),
            local: HashMap::new(),
            dirty: HashSet::new(),
            unusable: HashSet::new(),
            nh_users: HashMap::new(),
        }
    }
}

/// A change the mirror asks the caller to make to the data plane, besides FIB and neighbours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkChange {
    /// The tap of a VIF appeared (at start, or re-created).
    TapUp {
        /// The VIF.
        vif: VifId,
        /// Its tap's name.
        name: String,
    },
    /// The tap of a VIF was deleted.
    TapGone {
        /// The VIF.
        vif: VifId,
        /// Its tap's name.
        name: String,
    },
    /// The tap's MTU changed.
    Mtu {
        /// The VIF.
        vif: VifId,
        /// The new MTU.
        mtu: u32,
    },
}

/// The mirror of one namespace.
#[derive(Debug)]
pub struct Mirror {
    /// Tap name → VIF.
    vif_names: HashMap<String, VifId>,
    links: HashMap<u32, Link>,
    addrs: HashSet<(u32, IpAddr, u8)>,
    v4: Fam<V4>,
    v6: Fam<V6>,
    neigh: HashMap<(u32, IpAddr), EthernetAddress>,
    /// Nexthop objects by id.
    nexthops: HashMap<u32, NhDef>,
    /// Per resilient group, the member id of each bucket.
    res: HashMap<u32, Vec<u32>>,
    neigh_dirty: HashSet<(u32, IpAddr)>,
    /// (VIF, address) pairs this mirror put in the data plane's neighbour table, so a
    /// neighbour whose tap vanished can be taken out again.
    neigh_installed: HashMap<(u32, IpAddr), VifId>,
    /// Something changed that may affect any prefix (a link): recompute all on apply.
    all_dirty: bool,
    link_changes: Vec<LinkChange>,
}

/// Counts from one [`Mirror::apply`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// FIB routes added, replaced or removed.
    pub routes: u64,
    /// Neighbour entries set or removed.
    pub neighbours: u64,
    /// Prefixes newly found unusable (for the log).
    pub new_unusable: u64,
}

impl Mirror {
    /// An empty mirror for a VR whose VIF `i` has the tap `vif_names[i]`.
    pub fn new(vif_names: impl IntoIterator<Item = (String, VifId)>) -> Mirror {
        Mirror {
            vif_names: vif_names.into_iter().collect(),
            links: HashMap::new(),
            addrs: HashSet::new(),
            v4: Fam::default(),
            v6: Fam::default(),
            neigh: HashMap::new(),
            nexthops: HashMap::new(),
            res: HashMap::new(),
            neigh_dirty: HashSet::new(),
            neigh_installed: HashMap::new(),
            all_dirty: false,
            link_changes: Vec::new(),
        }
    }

    /// Forget everything the kernel said (before a resync's dump); what was installed in the
    /// data plane is kept and diffed against by the next [`Mirror::apply_all`], and so are
    /// the resilient groups' bucket tables.
    pub fn reset(&mut self) {
        let names = std::mem::take(&mut self.vif_names);
        let installed = std::mem::take(&mut self.neigh_installed);
        // Resilient groups' bucket tables too: the dump's groups are rebalanced from them,
        // so a resync moves no flow that the groups' members did not.
        let res = std::mem::take(&mut self.res);
        *self = Mirror::new(names);
        self.neigh_installed = installed;
        self.res = res;
    }

    /// The namespace's links.
    pub fn links(&self) -> &HashMap<u32, Link> {
        &self.links
    }

    /// Main-table routes held (IPv4, IPv6).
    pub fn kernel_routes(&self) -> (usize, usize) {
        (self.v4.routes.len(), self.v6.routes.len())
    }

    /// Nexthop objects held.
    pub fn nexthop_objects(&self) -> usize {
        self.nexthops.len()
    }

    /// Prefixes whose routes the data plane cannot forward (no next hop on a VIF, or a kind
    /// it has no action for).
    pub fn unusable(&self) -> usize {
        self.v4.unusable.len() + self.v6.unusable.len()
    }

    /// Some unusable prefixes, for messages.
    pub fn unusable_sample(&self, n: usize) -> Vec<String> {
        let mut v: Vec<String> = self.v4.unusable.iter().map(ToString::to_string).collect();
        v.extend(self.v6.unusable.iter().map(ToString::to_string));
        v.sort();
        v.truncate(n);
        v
    }

    /// Link changes since the last call (taps appearing, vanishing, changing MTU).
    pub fn take_link_changes(&mut self) -> Vec<LinkChange> {
        std::mem::take(&mut self.link_changes)
    }

    /// Take in one kernel change.
    pub fn event(&mut self, ev: Event) {
        match ev {
            Event::Link {
                index,
                name,
                up,
                mtu,
                carrier,
            } => {
                let vif = self.vif_names.get(&name).copied();
                let old = self.links.insert(
                    index,
                    Link {
                        name: name.clone(),
                        vif,
                        up,
                        mtu,
                        carrier,
                    },
                );
                if let Some(vif) = vif {
                    let known = old.as_ref().is_some_and(|o| o.vif == Some(vif));
                    if !known {
                        self.link_changes.push(LinkChange::TapUp {
                            vif,
                            name: name.clone(),
                        });
                    }
                    if old.as_ref().is_none_or(|o| o.mtu != mtu) {
                        self.link_changes.push(LinkChange::Mtu { vif, mtu });
                    }
                }
                if old.as_ref().is_none_or(|o| o.up != up || o.vif != vif) {
                    self.all_dirty = true;
                    self.dirty_neigh_of(index);
                }
                if old.as_ref().is_some_and(|o| o.up) && !up {
                    self.link_down(index, false);
                } else if old.as_ref().is_some_and(|o| o.carrier) && !carrier {
                    // Its carrier lost: the kernel deletes the nexthop objects through it
                    // (`nh_netdev_event`), silently; IPv4 routes stay, flagged `linkdown`.
                    self.flush_objects(index);
                }
            }
            Event::DelLink { index, name } => {
                if let Some(old) = self.links.remove(&index) {
                    if let Some(vif) = old.vif {
                        self.link_changes.push(LinkChange::TapGone {
                            vif,
                            name: old.name,
                        });
                    }
                } else if let Some(&vif) = self.vif_names.get(&name) {
                    self.link_changes.push(LinkChange::TapGone { vif, name });
                }
                self.link_down(index, true);
                self.all_dirty = true;
                // The kernel flushes its neighbours on the link; do not rely on seeing each.
                self.neigh.retain(|k, _| k.0 != index);
                self.dirty_neigh_of(index);
            }
            Event::Addr {
                deleted,
                index,
                addr,
                len,
            } => self.addr(deleted, index, addr, len),
            Event::Route(r) => self.route(r, false),
            Event::DelRoute(r) => self.route(r, true),
            Event::Nexthop { id, def } => {
                if self.nexthops.get(&id) != Some(&def) {
                    self.nexthops.insert(id, def);
                    self.rebuild_buckets(id);
                    self.nexthop_changed(id);
                }
            }
            Event::DelNexthop { id } => {
                self.res.remove(&id);
                if self.nexthops.remove(&id).is_some() {
                    self.nexthop_changed(id);
                }
                // The kernel took the routes using it out, without a route message.
                drop_nh_routes(&mut self.v4, id);
                drop_nh_routes(&mut self.v6, id);
            }
            Event::Neigh {
                deleted,
                index,
                addr,
                mac,
                state,
            } => {
                let key = (index, addr);
                let mac = mac.filter(|m| m.is_unicast() && *m != EthernetAddress([0; 6]));
                match (deleted, state, mac) {
                    (false, NeighState::Valid, Some(m)) => {
                        if self.neigh.insert(key, m) != Some(m) {
                            self.neigh_dirty.insert(key);
                        }
                    }
                    _ => {
                        if self.neigh.remove(&key).is_some() {
                            self.neigh_dirty.insert(key);
                        }
                    }
                }
            }
        }
    }

    /// Link `index` went down (`deleted`: went away). What the kernel then deletes without a
    /// message, the mirror deletes too (it announces IPv6 routes' deletions itself):
    /// - every IPv4 route all of whose next hops go through the link — any of them when it
    ///   was deleted (`fib_sync_down_dev`); a multipath route with a member elsewhere stays,
    ///   the member through the link left out while it is down ([`Mirror::flush_v4`]);
    /// - every nexthop object through it ([`Mirror::flush_objects`]; `nexthop_flush_dev`).
    ///
    /// Seen with `ip monitor` on 6.18: after a link flap such routes are gone for good.
    fn link_down(&mut self, index: u32, deleted: bool) {
        self.flush_v4(index, deleted);
        self.flush_objects(index);
    }

    /// Delete the nexthop objects through link `index`, as the kernel does, silently, when
    /// the link goes down or away or loses its carrier: out of the groups that held them,
    /// with the groups left empty and the routes that used any of them.
    fn flush_objects(&mut self, index: u32) {
        let gone: Vec<u32> = (self.nexthops.iter())
            .filter(|(_, d)| matches!(d, NhDef::One(h) if h.oif == index))
            .map(|(&id, _)| id)
            .collect();
        if gone.is_empty() {
            return;
        }
        let mut emptied = Vec::new();
        let mut shrunk = Vec::new();
        for (&g, def) in self.nexthops.iter_mut() {
            let (NhDef::Group(m) | NhDef::Resilient(m, _)) = def else {
                continue;
            };
            let n = m.len();
            m.retain(|(id, _)| !gone.contains(id));
            if m.is_empty() {
                emptied.push(g);
            } else if m.len() != n {
                shrunk.push(g);
            }
        }
        for id in gone.into_iter().chain(emptied) {
            self.event(Event::DelNexthop { id });
        }
        for g in shrunk {
            self.rebuild_buckets(g);
            self.nexthop_changed(g);
        }
    }

    /// Object `id` was (re)defined: a resilient group's bucket table follows its members
    /// ([`rebalance`]); any other object has none.
    fn rebuild_buckets(&mut self, id: u32) {
        match self.nexthops.get(&id) {
            Some(NhDef::Resilient(members, n)) => {
                let old = self.res.get(&id).map(Vec::as_slice);
                let table = rebalance(old, members, usize::from(*n));
                self.res.insert(id, table);
            }
            _ => {
                self.res.remove(&id);
            }
        }
    }

    /// Delete the IPv4 routes all of whose next hops go through link `index` (`any`: with
    /// any next hop through it), as the kernel does, silently, when the link goes down or
    /// away or loses its last IPv4 address. Routes through nexthop objects go with their
    /// objects instead.
    fn flush_v4(&mut self, index: u32, any: bool) {
        let through = |k: &KRoute| {
            let on = |h: &Hop| h.oif == index;
            k.nh.is_none()
                && !k.hops.is_empty()
                && if any {
                    k.hops.iter().any(on)
                } else {
                    k.hops.iter().all(on)
                }
        };
        let v4 = &mut self.v4;
        v4.routes.retain(|p, list| {
            let before = list.len();
            list.retain(|k| !through(k));
            if list.len() != before {
                v4.dirty.insert(*p);
            }
            !list.is_empty()
        });
    }

    /// Nexthop object `id` changed: recompute the prefixes that use it, directly or through
    /// a group holding it.
    fn nexthop_changed(&mut self, id: u32) {
        let mut ids = vec![id];
        ids.extend(
            (self.nexthops.iter())
                .filter(|(_, def)| def.members().iter().any(|&(x, _)| x == id))
                .map(|(&g, _)| g),
        );
        for id in ids {
            dirty_nh_users(&mut self.v4, id);
            dirty_nh_users(&mut self.v6, id);
        }
    }

    /// The nexthop objects, for resolving routes.
    fn objects(&self) -> Objects<'_> {
        Objects {
            defs: &self.nexthops,
            res: &self.res,
        }
    }

    fn dirty_neigh_of(&mut self, index: u32) {
        let keys: Vec<_> = self
            .neigh
            .keys()
            .chain(self.neigh_installed.keys())
            .filter(|k| k.0 == index)
            .copied()
            .collect();
        self.neigh_dirty.extend(keys);
    }

    fn addr(&mut self, deleted: bool, index: u32, addr: IpAddr, len: u8) {
        if addr.is_loopback() || addr.is_unspecified() || addr.is_multicast() {
            return;
        }
        let key = (index, addr, len);
        let changed = if deleted {
            self.addrs.remove(&key)
        } else {
            self.addrs.insert(key)
        };
        if !changed {
            return;
        }
        let (l4, l6) = match addr {
            IpAddr::V4(a) => IfAddr::V4(a, len),
            IpAddr::V6(a) => IfAddr::V6(a, len),
        }
        .local_prefixes();
        for p in l4 {
            refcount(&mut self.v4.local, p, deleted);
            self.v4.dirty.insert(p);
        }
        for p in l6 {
            refcount(&mut self.v6.local, p, deleted);
            self.v6.dirty.insert(p);
        }
        // The link's last IPv4 address gone: the kernel takes IPv4 down on it
        // (`fib_disable_ip`), deleting its routes as for the link going down, silently.
        if deleted
            && addr.is_ipv4()
            && !self
                .addrs
                .iter()
                .any(|&(i, a, _)| i == index && a.is_ipv4())
        {
            self.flush_v4(index, false);
        }
    }

    fn route(&mut self, r: RouteMsg, deleted: bool) {
        if r.table != RT_TABLE_MAIN || r.tos != 0 || r.src_len != 0 {
            return;
        }
        let ipv6 = matches!(r.prefix, IpPrefix::V6(_));
        match r.prefix {
            IpPrefix::V4(p) => {
                if skip4(&p) {
                    return;
                }
                edit(&mut self.v4, p, r, deleted, ipv6);
            }
            IpPrefix::V6(p) => {
                if skip6(&p) {
                    return;
                }
                edit(&mut self.v6, p, r, deleted, ipv6);
            }
        }
    }

    /// Push the dirty prefixes and neighbours into the VR.
    pub fn apply(&mut self, vr: &Vr) -> Applied {
        if self.all_dirty {
            return self.apply_all(vr);
        }
        let mut out = Applied::default();
        let links = &self.links;
        let vif_up = |o: u32| links.get(&o).filter(|l| l.up).and_then(|l| l.vif);
        for p in std::mem::take(&mut self.v4.dirty) {
            let w = want(&self.v4, &p, vif_up, self.objects());
            let o = settle(&vr.fib4, &mut self.v4.unusable, p, w, &mut out);
            count(&mut out, o);
        }
        for p in std::mem::take(&mut self.v6.dirty) {
            let w = want(&self.v6, &p, vif_up, self.objects());
            let o = settle(&vr.fib6, &mut self.v6.unusable, p, w, &mut out);
            count(&mut out, o);
        }
        self.apply_neigh(vr, &mut out);
        out
    }

    fn apply_neigh(&mut self, vr: &Vr, out: &mut Applied) {
        let keys: Vec<_> = self.neigh_dirty.drain().collect();
        for key in keys {
            let want = self
                .neigh
                .get(&key)
                .and_then(|m| Some((self.links.get(&key.0)?.vif?, *m)));
            let had = self.neigh_installed.get(&key).copied();
            match want {
                Some((vif, mac)) => {
                    if let Some(old) = had
                        && old != vif
                    {
                        vr.neigh.remove(old, key.1);
                    }
                    if vr.neigh.get(vif, key.1) != Some(mac) {
                        vr.neigh.set(vif, key.1, mac);
                        out.neighbours += 1;
                    }
                    self.neigh_installed.insert(key, vif);
                }
                None => {
                    if let Some(old) = had {
                        if vr.neigh.remove(old, key.1) {
                            out.neighbours += 1;
                        }
                        self.neigh_installed.remove(&key);
                    }
                }
            }
        }
    }

    /// Make the VR's FIBs and neighbour table equal to what the mirror says, touching only
    /// what differs (start, resync, link changes).
    pub fn apply_all(&mut self, vr: &Vr) -> Applied {
        self.all_dirty = false;
        let mut out = Applied::default();
        let links = &self.links;
        let vif_up = |o: u32| links.get(&o).filter(|l| l.up).and_then(|l| l.vif);
        let nh = Objects {
            defs: &self.nexthops,
            res: &self.res,
        };
        out.routes += sync_table(&vr.fib4, &mut self.v4, &vif_up, nh, &mut out.new_unusable);
        out.routes += sync_table(&vr.fib6, &mut self.v6, &vif_up, nh, &mut out.new_unusable);
        // Neighbours: every (VIF, address) of the data plane's table that the kernel does not
        // hold goes, every one it holds is set.
        let want: HashMap<(VifId, IpAddr), EthernetAddress> = self
            .neigh
            .iter()
            .filter_map(|(k, m)| Some(((self.links.get(&k.0)?.vif?, k.1), *m)))
            .collect();
        for (vif, addr, _) in vr.neigh.entries() {
            if !want.contains_key(&(vif, addr)) {
                vr.neigh.remove(vif, addr);
                out.neighbours += 1;
            }
        }
        for (&(vif, addr), &mac) in &want {
            if vr.neigh.get(vif, addr) != Some(mac) {
                vr.neigh.set(vif, addr, mac);
                out.neighbours += 1;
            }
        }
        self.neigh_installed = self
            .neigh
            .keys()
            .filter_map(|k| Some((*k, self.links.get(&k.0)?.vif?)))
            .collect();
        self.neigh_dirty.clear();
        out
    }
}

fn count(out: &mut Applied, o: Outcome) {
    if o != Outcome::Unchanged {
        out.routes += 1;
    }
}

/// Recompute every prefix of one family and make the FIB equal to it; returns the number of
/// routes changed. A diff that touches most of a big table is loaded whole instead (one
/// rebuild and one pointer swap rather than a trie update per route).
fn sync_table<F: Family>(
    fib: &Table<F>,
    fam: &mut Fam<F>,
    vif_up: &impl Fn(u32) -> Option<VifId>,
    nexthops: Objects<'_>,
    new_unusable: &mut u64,
) -> u64 {
    fam.dirty.clear();
    let mut wanted: HashMap<Prefix<F>, NextHopSet> = HashMap::with_capacity(fam.routes.len());
    let mut unusable = HashSet::new();
    for p in fam.routes.keys().chain(fam.local.keys()) {
        match want(fam, p, vif_up, nexthops) {
            Ok(Some(set)) => {
                wanted.insert(*p, set);
            }
            Ok(None) => {}
            Err(()) => {
                unusable.insert(*p);
            }
        }
    }
    *new_unusable += unusable.difference(&fam.unusable).count() as u64;
    fam.unusable = unusable;
    let have = fib.routes();
    let mut same = 0usize;
    let mut stale = Vec::new();
    let mut changed = HashSet::new();
    for (p, set) in &have {
        match wanted.get(p) {
            Some(w) if w == set => same += 1,
            Some(_) => {
                changed.insert(*p);
            }
            None => stale.push(*p),
        }
    }
    let missing = wanted.len() - same - changed.len();
    let diff = stale.len() + changed.len() + missing;
    if diff > 4096 && diff > wanted.len() / 2 && fib.load(wanted.clone()).is_ok() {
        return diff as u64;
    }
    for p in stale {
        let _ = fib.remove(&p);
    }
    let have: HashSet<Prefix<F>> = have.into_iter().map(|(p, _)| p).collect();
    for (p, set) in wanted {
        if (!have.contains(&p) || changed.contains(&p)) && fib.insert(p, set).is_err() {
            fam.unusable.insert(p);
        }
    }
    diff as u64
}

fn refcount<P: Eq + std::hash::Hash>(m: &mut HashMap<P, u32>, p: P, deleted: bool) {
    if deleted {
        if let Some(n) = m.get_mut(&p) {
            *n -= 1;
            if *n == 0 {
                m.remove(&p);
            }
        }
    } else {
        *m.entry(p).or_insert(0) += 1;
    }
}

fn skip4(p: &Prefix4) -> bool {
    let a: Ipv4Addr = p.addr();
    p.len() >= 4 && a.is_multicast()
}

fn skip6(p: &Prefix6) -> bool {
    let a: Ipv6Addr = p.addr();
    p.len() >= 10 && a.is_unicast_link_local() || p.len() >= 8 && a.is_multicast()
}

/// Change one family's entry for `p` as the kernel did.
fn edit<F: Family>(fam: &mut Fam<F>, p: Prefix<F>, r: RouteMsg, deleted: bool, ipv6: bool) {
    let route = KRoute {
        metric: r.metric,
        kind: r.kind,
        hops: r.hops.into_boxed_slice(),
        nh: r.nh,
    };
    if let (Some(id), false) = (route.nh, deleted) {
        fam.nh_users.entry(id).or_default().insert(p);
    }
    let list = fam.routes.entry(p).or_default();
    // Routes of the same metric sit together, in the kernel's order.
    let same = |k: &KRoute| k.metric == route.metric;
    if deleted {
        if route.nh.is_some() {
            // A route through a nexthop object: named by the object (the next hops the
            // message expands may be newer than those the route was added with).
            if let Some(i) = list.iter().position(|k| same(k) && k.nh == route.nh) {
                list.remove(i);
            }
        } else if ipv6
            && route.kind == RouteKind::Unicast
            && route.hops.iter().any(|h| h.gateway.is_some())
        {
            // IPv6 deletes multipath siblings one by one: take out the named next hops.
            for k in list.iter_mut().filter(|k| same(k)) {
                k.hops = k
                    .hops
                    .iter()
                    .filter(|h| {
                        !route
                            .hops
                            .iter()
                            .any(|d| d.gateway == h.gateway && d.oif == h.oif)
                    })
                    .copied()
                    .collect();
            }
            list.retain(|k| !(same(k) && k.kind == RouteKind::Unicast && k.hops.is_empty()));
        } else if let Some(i) = list
            .iter()
            .position(|k| same(k) && k.kind == route.kind && k.hops == route.hops)
            .or_else(|| list.iter().position(same))
        {
            list.remove(i);
        }
    } else {
        let first = list.iter().position(same);
        if ipv6 {
            // IPv6 announces the whole sibling set of a gateway route each time; a device
            // route on another device is a route of its own.
            let gw = route.hops.iter().any(|h| h.gateway.is_some());
            let with_nh = route.nh.is_some();
            let at = list.iter().position(|k| {
                same(k)
                    && (with_nh && k.nh.is_some()
                        || k.kind != RouteKind::Unicast
                        || route.kind != RouteKind::Unicast
                        || (gw && k.hops.iter().any(|h| h.gateway.is_some()))
                        || (!gw && k.hops == route.hops))
            });
            match at {
                Some(i) => list[i] = route,
                None => insert_sorted(list, route, false),
            }
        } else if r.replace {
            match first {
                Some(i) => list[i] = route,
                None => insert_sorted(list, route, false),
            }
        } else if list.contains(&route) {
            // Already known (a dump after events, or an echo): nothing to do.
        } else {
            insert_sorted(list, route, !r.append);
        }
    }
    if list.is_empty() {
        fam.routes.remove(&p);
    }
    fam.dirty.insert(p);
}

/// Put `route` among routes sorted by metric: before others of its metric if `front`
/// (`ip route prepend`/`add`), else after them.
fn insert_sorted(list: &mut Vec<KRoute>, route: KRoute, front: bool) {
    let at = if front {
        list.iter().position(|k| k.metric >= route.metric)
    } else {
        list.iter().position(|k| k.metric > route.metric)
    }
    .unwrap_or(list.len());
    list.insert(at, route);
}

/// The FIB value for `p`: `Ok(None)` no route, `Err(())` a route the data plane cannot use.
fn want<F: Family>(
    fam: &Fam<F>,
    p: &Prefix<F>,
    vif_up: impl Fn(u32) -> Option<VifId>,
    objects: Objects<'_>,
) -> Result<Option<NextHopSet>, ()> {
    if fam.local.contains_key(p) {
        return Ok(Some(NextHopSet::one(NextHop::Local)));
    }
    let Some(best) = fam.routes.get(p).and_then(|l| l.first()) else {
        return Ok(None);
    };
    let (kind, resolved) = objects.resolve(best);
    let hop = match kind {
        RouteKind::Local => NextHop::Local,
        RouteKind::Blackhole => NextHop::Drop,
        RouteKind::Unreachable => NextHop::Unreachable,
        RouteKind::Prohibit => NextHop::Prohibit,
        RouteKind::Other(_) => return Err(()),
        RouteKind::Unicast => {
            let Resolved { hops: all, buckets } = resolved;
            let mut hops: Vec<(NextHop, u16)> = Vec::with_capacity(all.len());
            // Each usable member object's place in `hops` (for a resilient table).
            let mut place: Vec<(u32, usize)> = Vec::new();
            for &(h, id) in all.iter().filter(|(h, _)| !h.dead) {
                let Some(vif) = vif_up(h.oif) else { continue };
                let ifindex = u32::from(vif);
                let nh = match h.gateway {
                    Some(addr) => NextHop::Via { addr, ifindex },
                    None => NextHop::Attached { ifindex },
                };
                let weight = h.weight.clamp(1, vrhost_fib::MAX_WEIGHT);
                let i = match hops.iter().position(|(x, _)| *x == nh) {
                    // The same next hop twice takes both shares (up to the largest weight).
                    Some(i) => {
                        hops[i].1 = (hops[i].1 + weight).min(vrhost_fib::MAX_WEIGHT);
                        i
                    }
                    None => {
                        hops.push((nh, weight));
                        hops.len() - 1
                    }
                };
                place.push((id, i));
            }
            hops.truncate(vrhost_fib::MAX_ECMP);
            place.retain(|&(_, i)| i < hops.len());
            let set = match (hops.len(), buckets) {
                (0, _) if all.iter().all(|(h, _)| h.dead) && !all.is_empty() => return Ok(None),
                (0, _) => return Err(()),
                // A table the FIB cannot take (over MAX_BUCKETS buckets): hash-threshold.
                (_, Some(table)) if (2..=vrhost_fib::MAX_BUCKETS).contains(&table.len()) => {
                    NextHopSet::resilient(hops, objects::buckets(table, &place))
                }
                _ => NextHopSet::weighted(hops),
            };
            return set.map(Some).map_err(|_| ());
        }
    };
    Ok(Some(NextHopSet::one(hop)))
}

/// Make the FIB's entry for `p` what `want` says; track unusable prefixes.
fn settle<F: Family>(
    fib: &Table<F>,
    unusable: &mut HashSet<Prefix<F>>,
    p: Prefix<F>,
    want: Result<Option<NextHopSet>, ()>,
    out: &mut Applied,
) -> Outcome {
    let want = match want {
        Ok(w) => {
            unusable.remove(&p);
            w
        }
        Err(()) => {
            if unusable.insert(p) {
                out.new_unusable += 1;
            }
            None
        }
    };
    match want {
        Some(set) => match fib.insert(p, set.clone()) {
            Ok(Some(old)) if old == set => Outcome::Unchanged,
            Ok(_) => Outcome::Installed,
            Err(_) => {
                unusable.insert(p);
                Outcome::Unchanged
            }
        },
        None => match fib.remove(&p) {
            Ok(_) => Outcome::Removed,
            Err(_) => Outcome::Unchanged,
        },
    }
}

mod objects;
#[cfg(test)]
mod tests;
