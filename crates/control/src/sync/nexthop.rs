//! Nexthop objects (`ip nexthop`, Linux 5.3 and later): the `RTM_NEWNEXTHOP` /
//! `RTM_DELNEXTHOP` messages, decoded here because `netlink-packet-route` does not know them.
//!
//! Why the mirror must follow them: FRR's zebra installs its routes with nexthop groups where
//! the kernel has them (`ip route … nhid N`), and the kernel changes such routes without a
//! route message of its own. Deleting a next hop — or taking its device down, which deletes
//! every next hop through it — removes the routes that use it and shrinks the groups that
//! held it, announced only as `RTM_DELNEXTHOP` and a `RTM_NEWNEXTHOP` for each group (seen with
//! `ip monitor route nexthop` on 6.18). With `net.ipv4.nexthop_compat_mode` off, route
//! messages carry the id alone, with no next hop expanded at all. So the mirror keeps the
//! objects by id and resolves a route's next hops through them ([`super::mirror`]).
//!
//! Layout (`include/uapi/linux/nexthop.h`): a `struct nhmsg` (family, scope, protocol,
//! reserved, then 32-bit `RTNH_F_*` flags) and attributes `NHA_*`. A group is an array of
//! `struct nexthop_grp` { id: u32, weight: u8, weight_high: u8, reserved: u16 }: the weight
//! less one, its high byte in what older kernels left reserved (zero there).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::mirror::{Event, Hop, NhDef};

/// `RTM_NEWNEXTHOP` (`linux/rtnetlink.h`).
pub const RTM_NEWNEXTHOP: u16 = 104;
/// `RTM_DELNEXTHOP`.
pub const RTM_DELNEXTHOP: u16 = 105;
/// `RTM_GETNEXTHOP`.
pub const RTM_GETNEXTHOP: u16 = 106;
/// The multicast group of nexthop changes (`RTNLGRP_NEXTHOP`).
pub const RTNLGRP_NEXTHOP: u32 = 32;

const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_GROUP_TYPE: u16 = 3;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
const NHA_ENCAP_TYPE: u16 = 7;
const NHA_FDB: u16 = 11;
const NHA_RES_GROUP: u16 = 12;
/// In `NHA_RES_GROUP`: the bucket count (u16).
const NHA_RES_GROUP_BUCKETS: u16 = 1;
/// `NEXTHOP_GRP_TYPE_RES`.
const GROUP_RESILIENT: u16 = 1;
/// `RTNH_F_DEAD`.
const RTNH_F_DEAD: u32 = 1;
/// The attribute type without `NLA_F_NESTED` / `NLA_F_NET_BYTEORDER`.
const NLA_TYPE_MASK: u16 = 0x3fff;
/// `struct nhmsg`.
const NHMSG_LEN: usize = 8;

/// The body of a nexthop dump request: a `struct nhmsg` of family `AF_UNSPEC` (both
/// families), no attributes.
pub fn dump_body() -> [u8; NHMSG_LEN] {
    [0; NHMSG_LEN]
}

/// Decode a nexthop message's body (after the netlink header) into an event; `None` if it
/// is not one (too short, no id, an attribute that runs past the end).
pub fn parse(message_type: u16, body: &[u8]) -> Option<Event> {
    let deleted = match message_type {
        RTM_NEWNEXTHOP => false,
        RTM_DELNEXTHOP => true,
        _ => return None,
    };
    let head = body.get(..NHMSG_LEN)?;
    let flags = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]);
    let mut id = None;
    let mut group = None;
    let mut blackhole = false;
    let mut oif = 0;
    let mut gateway = None;
    let mut other = false;
    let mut resilient = false;
    let mut buckets = None;
    for (kind, value) in attrs(&body[NHMSG_LEN..]) {
        let value = value?;
        match kind {
            NHA_ID => id = Some(u32::from_ne_bytes(value.get(..4)?.try_into().ok()?)),
            NHA_GROUP => {
                if value.len() % 8 != 0 {
                    return None;
                }
                let members = value
                    .chunks_exact(8)
                    .map(|g| {
                        let id = u32::from_ne_bytes([g[0], g[1], g[2], g[3]]);
                        (id, 1 + u32::from(g[4]) + (u32::from(g[5]) << 8))
                    })
                    .collect();
                group = Some(members);
            }
            NHA_GROUP_TYPE => {
                resilient = u16::from_ne_bytes(value.get(..2)?.try_into().ok()?) == GROUP_RESILIENT;
            }
            NHA_RES_GROUP => {
                for (kind, value) in attrs(value) {
                    if kind == NHA_RES_GROUP_BUCKETS {
                        buckets = Some(u16::from_ne_bytes(value?.get(..2)?.try_into().ok()?));
                    }
                }
            }
            NHA_BLACKHOLE => blackhole = true,
            NHA_OIF => oif = u32::from_ne_bytes(value.get(..4)?.try_into().ok()?),
            NHA_GATEWAY => {
                gateway = Some(match value.len() {
                    4 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(value).ok()?)),
                    16 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(value).ok()?)),
                    _ => return None,
                });
            }
            // Encapsulated (MPLS, seg6 …) and FDB (VXLAN) next hops: nothing the data plane
            // forwards by.
            NHA_ENCAP_TYPE | NHA_FDB => other = true,
            _ => {}
        }
    }
    let id = id?;
    if deleted {
        return Some(Event::DelNexthop { id });
    }
    let def = if let Some(members) = group {
        match (resilient, buckets) {
            (true, Some(b)) => NhDef::Resilient(members, b),
            (true, None) => return None,
            (false, _) => NhDef::Group(members),
        }
    } else if blackhole {
        NhDef::Blackhole
    } else if other || oif == 0 {
        NhDef::Other
    } else {
        NhDef::One(Hop {
            gateway,
            oif,
            dead: flags & RTNH_F_DEAD != 0,
            weight: 1,
        })
    };
    Some(Event::Nexthop { id, def })
}

/// The attributes in `b`: (type, value), the value `None` where the attribute runs past
/// the end (the caller refuses the message then).
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, Option<&[u8]>)> {
    core::iter::from_fn(move || {
        if b.is_empty() {
            return None;
        }
        let Some(hdr) = b.get(..4) else {
            b = &[];
            return Some((0, None));
        };
        let len = usize::from(u16::from_ne_bytes([hdr[0], hdr[1]]));
        let kind = u16::from_ne_bytes([hdr[2], hdr[3]]) & NLA_TYPE_MASK;
        let value = b.get(4..len);
        b = if value.is_some() {
            b.get(len.next_multiple_of(4)..).unwrap_or(&[])
        } else {
            &[]
        };
        Some((kind, value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attribute, padded to 4 bytes.
    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(4 + value.len() as u16).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(value);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    fn msg(family: u8, flags: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
        let mut v = vec![family, 0, 4, 0];
        v.extend_from_slice(&flags.to_ne_bytes());
        for a in attrs {
            v.extend_from_slice(a);
        }
        v
    }

    #[test]
    fn single_next_hops_of_both_families() {
        let m = msg(
            2,
            0,
            &[
                nla(NHA_ID, &7u32.to_ne_bytes()),
                nla(NHA_OIF, &11u32.to_ne_bytes()),
                nla(NHA_GATEWAY, &[10, 0, 0, 2]),
            ],
        );
        assert_eq!(
            parse(RTM_NEWNEXTHOP, &m),
            Some(Event::Nexthop {
                id: 7,
                def: NhDef::One(Hop {
                    gateway: Some("10.0.0.2".parse().unwrap()),
                    oif: 11,
                    dead: false,
                    weight: 1,
                }),
            })
        );
        let gw: Ipv6Addr = "fd00:b::2".parse().unwrap();
        let m = msg(
            10,
            RTNH_F_DEAD,
            &[
                nla(NHA_ID, &8u32.to_ne_bytes()),
                nla(NHA_GATEWAY, &gw.octets()),
                nla(NHA_OIF, &12u32.to_ne_bytes()),
            ],
        );
        assert_eq!(
            parse(RTM_NEWNEXTHOP, &m),
            Some(Event::Nexthop {
                id: 8,
                def: NhDef::One(Hop {
                    gateway: Some(IpAddr::V6(gw)),
                    oif: 12,
                    dead: true,
                    weight: 1,
                }),
            })
        );
        // A device next hop has no gateway.
        let m = msg(
            2,
            0,
            &[
                nla(NHA_ID, &9u32.to_ne_bytes()),
                nla(NHA_OIF, &11u32.to_ne_bytes()),
            ],
        );
        assert!(matches!(
            parse(RTM_NEWNEXTHOP, &m),
            Some(Event::Nexthop {
                id: 9,
                def: NhDef::One(Hop {
                    gateway: None,
                    oif: 11,
                    ..
                })
            })
        ));
    }

    #[test]
    fn groups_blackholes_deletes_and_what_is_not_forwarded() {
        // `group 1,3/2` (weight 3 is stored as 2), and a 16-bit weight of 300 (299 = 0x12b).
        let mut g = Vec::new();
        g.extend_from_slice(&1u32.to_ne_bytes());
        g.extend_from_slice(&[2, 0, 0, 0]);
        g.extend_from_slice(&2u32.to_ne_bytes());
        g.extend_from_slice(&[0, 0, 0, 0]);
        g.extend_from_slice(&3u32.to_ne_bytes());
        g.extend_from_slice(&[0x2b, 0x01, 0, 0]);
        let m = msg(
            0,
            0,
            &[nla(NHA_ID, &10u32.to_ne_bytes()), nla(NHA_GROUP, &g)],
        );
        assert_eq!(
            parse(RTM_NEWNEXTHOP, &m),
            Some(Event::Nexthop {
                id: 10,
                def: NhDef::Group(vec![(1, 3), (2, 1), (3, 300)]),
            })
        );
        let m = msg(
            2,
            0,
            &[nla(NHA_ID, &5u32.to_ne_bytes()), nla(NHA_BLACKHOLE, &[])],
        );
        assert_eq!(
            parse(RTM_NEWNEXTHOP, &m),
            Some(Event::Nexthop {
                id: 5,
                def: NhDef::Blackhole
            })
        );
        let m = msg(
            2,
            0,
            &[
                nla(NHA_ID, &6u32.to_ne_bytes()),
                nla(NHA_GATEWAY, &[10, 0, 0, 9]),
                nla(NHA_FDB, &[]),
            ],
        );
        assert_eq!(
            parse(RTM_NEWNEXTHOP, &m),
            Some(Event::Nexthop {
                id: 6,
                def: NhDef::Other
            })
        );
        let m = msg(2, 0, &[nla(NHA_ID, &6u32.to_ne_bytes())]);
        assert_eq!(parse(RTM_DELNEXTHOP, &m), Some(Event::DelNexthop { id: 6 }));
    }

    /// `ip nexthop add id 20 group 1/2 type resilient buckets 64`: the group type and the
    /// nested bucket count (with the timers the kernel adds, ignored).
    #[test]
    fn resilient_groups() {
        let mut g = Vec::new();
        g.extend_from_slice(&1u32.to_ne_bytes());
        g.extend_from_slice(&[0; 4]);
        g.extend_from_slice(&2u32.to_ne_bytes());
        g.extend_from_slice(&[0; 4]);
        let mut res = nla(NHA_RES_GROUP_BUCKETS, &64u16.to_ne_bytes());
        res.extend(nla(2, &120u32.to_ne_bytes())); // idle timer
        let m = msg(
            0,
            0,
            &[
                nla(NHA_ID, &20u32.to_ne_bytes()),
                nla(NHA_GROUP, &g),
                nla(NHA_GROUP_TYPE, &GROUP_RESILIENT.to_ne_bytes()),
                nla(NHA_RES_GROUP | 0x8000, &res),
            ],
        );
        assert_eq!(
            parse(RTM_NEWNEXTHOP, &m),
            Some(Event::Nexthop {
                id: 20,
                def: NhDef::Resilient(vec![(1, 1), (2, 1)], 64),
            })
        );
        // Resilient without its bucket count: refused, not taken for a plain group.
        let m = msg(
            0,
            0,
            &[
                nla(NHA_ID, &20u32.to_ne_bytes()),
                nla(NHA_GROUP, &g),
                nla(NHA_GROUP_TYPE, &GROUP_RESILIENT.to_ne_bytes()),
            ],
        );
        assert_eq!(parse(RTM_NEWNEXTHOP, &m), None);
    }

    proptest::proptest! {
        /// Any bytes: an event or `None`, never a panic; and any message built of
        /// well-formed attributes with an id decodes to that id.
        #[test]
        fn any_bytes_decode_or_are_refused(
            ty in proptest::sample::select(vec![RTM_NEWNEXTHOP, RTM_DELNEXTHOP, 24]),
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
            id in 1u32..,
            attrs in proptest::collection::vec(
                (0u16..16, proptest::collection::vec(proptest::num::u8::ANY, 0..40)),
                0..6,
            ),
        ) {
            let _ = parse(ty, &body);
            let mut list = vec![nla(NHA_ID, &id.to_ne_bytes())];
            // Other attributes, none of them an id; garbage where a value has a shape
            // may refuse the message, but never give another id.
            list.extend(attrs.iter().filter(|(k, _)| *k != NHA_ID).map(|(k, v)| nla(*k, v)));
            match parse(RTM_NEWNEXTHOP, &msg(2, 0, &list)) {
                Some(Event::Nexthop { id: got, .. }) => proptest::prop_assert_eq!(got, id),
                Some(other) => proptest::prop_assert!(false, "{other:?}"),
                None => {}
            }
        }
    }

    #[test]
    fn malformed_messages_are_refused_not_misread() {
        let good = msg(
            2,
            0,
            &[
                nla(NHA_ID, &7u32.to_ne_bytes()),
                nla(NHA_OIF, &11u32.to_ne_bytes()),
            ],
        );
        assert!(parse(RTM_NEWNEXTHOP, &good).is_some());
        // Every truncation of it, and of its header.
        for n in 0..good.len() {
            let r = parse(RTM_NEWNEXTHOP, &good[..n]);
            assert!(r.is_none() || n >= good.len() - 8, "{n} bytes gave {r:?}");
        }
        // No id; an attribute longer than the message; a group not a whole number of
        // entries; a gateway of neither length; another message type.
        assert_eq!(parse(RTM_NEWNEXTHOP, &msg(2, 0, &[])), None);
        let mut long = good.clone();
        long[NHMSG_LEN] = 200;
        assert_eq!(parse(RTM_NEWNEXTHOP, &long), None);
        let m = msg(
            0,
            0,
            &[nla(NHA_ID, &1u32.to_ne_bytes()), nla(NHA_GROUP, &[0; 6])],
        );
        assert_eq!(parse(RTM_NEWNEXTHOP, &m), None);
        let m = msg(
            2,
            0,
            &[
                nla(NHA_ID, &1u32.to_ne_bytes()),
                nla(NHA_GATEWAY, &[1, 2, 3]),
            ],
        );
        assert_eq!(parse(RTM_NEWNEXTHOP, &m), None);
        assert_eq!(parse(24, &good), None);
    }
}
