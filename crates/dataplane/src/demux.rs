//! Demux: which (VR, VIF) a received frame belongs to.
//!
//! Per port, frames are matched on (VLAN id, destination MAC): the macvlan model, where every
//! VIF has its own MAC; a VLAN sub-interface (one per VLAN) takes its VLAN's frames to its
//! MAC and the VLAN's group frames, while VIFs with MACs of their own may share the VLAN;
//! match rules split one MAC's traffic between VRs. Broadcast and multicast frames go to
//! every VIF on the same port and VLAN (macvlan bridge mode): the first gets the frame, the
//! others copies. So does an ARP frame to a MAC that rules share, to every VIF whose rule
//! takes it: ARP carries addresses but no protocol or ports, so two VRs that split one MAC
//! by port both need the replies to their requests.
//!
//! The tables are built by the control side and published in the data plane's snapshot;
//! workers only read them. A unicast frame takes one probe of a table keyed by (VLAN, MAC)
//! ([`crate::mactable`]); group-addressed ones one of the VLAN map.

use core::net::{IpAddr, Ipv4Addr};

use rustc_hash::FxHashMap;
use vrhost_wire::ethernet::{EtherType, EthernetAddress};
use vrhost_wire::vlan;

use crate::counters::Drop;
use crate::flow::{self, Class, flow_key_v4, flow_key_v6};
use crate::mactable::{MacTable, Target};
use crate::vr::{DemuxKey, FlowKey, MatchRule, VifConfig, VifId, VrId};

/// A VIF, globally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VifRef {
    /// The VR.
    pub vr: VrId,
    /// The VIF within it.
    pub vif: VifId,
}

/// VLAN key for untagged (and priority-tagged, VID 0) frames.
const UNTAGGED: u16 = 0;

#[derive(Debug, Clone, Default)]
struct VlanDemux {
    /// A VIF owning the whole VLAN (`DemuxKey::Vlan`), with its MAC.
    whole: Option<(EthernetAddress, VifRef)>,
    /// Every VIF on this port and VLAN, in the order added (broadcast/multicast fan-out).
    members: Vec<VifRef>,
}

/// One port's demux table.
///
/// Unicast frames take one probe keyed by (VLAN, destination MAC) packed in a `u64`; two
/// probes — VLAN, then MAC — measured 2.5× the demux cost with 100 VRs.
#[derive(Debug, Clone, Default)]
pub struct PortDemux {
    vlans: FxHashMap<u16, VlanDemux>,
    macs: MacTable,
    /// The match rules of keys whose target is [`Target::Rules`].
    rules: FxHashMap<u64, Vec<(MatchRule, VifRef)>>,
}

/// The (VLAN, MAC) key of the unicast table: `vid << 48 | mac`.
#[inline(always)]
pub(crate) fn mac_key(vid: u16, mac: &[u8]) -> u64 {
    u64::from(vid) << 48
        | u64::from(u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]])) << 16
        | u64::from(u16::from_be_bytes([mac[4], mac[5]]))
}

/// Where a frame goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// To one VIF, decided by VLAN and destination MAC alone (so the same for every frame
    /// with those: the worker remembers it for the next frame).
    One(VifRef),
    /// To one VIF, chosen by a match rule (depends on the L3 header too).
    Rule(VifRef),
    /// A group-addressed frame: to each of these VIFs.
    Flood(&'a [VifRef]),
    /// An ARP frame to a MAC that rules share, which at least one of them takes: a copy to
    /// each VIF whose rule takes it ([`ArpRules::copies`]).
    Arp(ArpRules<'a>),
    /// Nowhere.
    Drop(Drop),
}

// Returned for every frame the memo does not decide: three words, not more.
const _: () = assert!(core::mem::size_of::<Verdict<'static>>() == 24);

impl<'a> Verdict<'a> {
    /// The VIFs that get a copy of `frame` (demuxed, with its `l2`) under a verdict that
    /// copies it: every VIF of a [`Verdict::Flood`], those of [`ArpRules::copies`] for a
    /// [`Verdict::Arp`]. No VIF for the verdicts that do not copy.
    pub fn copies(self, frame: &[u8], l2: &L2Info) -> Copies<'a> {
        match self {
            Verdict::Flood(vifs) => vifs.into(),
            Verdict::Arp(rules) => rules.copies(frame, l2),
            Verdict::One(_) | Verdict::Rule(_) | Verdict::Drop(_) => Copies::none(),
        }
    }
}

/// The rules of a MAC that an ARP frame was sent to ([`Verdict::Arp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArpRules<'a>(&'a [(MatchRule, VifRef)]);

impl<'a> ArpRules<'a> {
    /// The VIFs whose rules take `frame` (the ARP demuxed, with its `l2`), in the order they
    /// were added: an iterator that allocates nothing and borrows nothing of the frame. (The
    /// verdict does not carry the addresses, so that every [`Verdict`] stays three words.)
    pub fn copies(self, frame: &[u8], l2: &L2Info) -> Copies<'a> {
        // Demux gives this verdict only for an ARP with readable addresses; for any other
        // frame, no VIF.
        match arp_addrs(frame, l2) {
            Some((sender, target)) => Copies(Inner::Arp(self.0.iter(), sender, target)),
            None => Copies::none(),
        }
    }
}

/// The VIFs that get a copy of a frame: every VIF of a [`Verdict::Flood`], or those of
/// [`ArpRules::copies`].
#[derive(Debug, Clone)]
pub struct Copies<'a>(Inner<'a>);

impl Copies<'_> {
    /// No VIF.
    fn none() -> Self {
        Copies(Inner::All([].iter()))
    }
}

impl<'a> From<&'a [VifRef]> for Copies<'a> {
    fn from(vifs: &'a [VifRef]) -> Self {
        Copies(Inner::All(vifs.iter()))
    }
}

#[derive(Debug, Clone)]
enum Inner<'a> {
    All(core::slice::Iter<'a, VifRef>),
    /// Rules, and the ARP's sender and target addresses.
    Arp(
        core::slice::Iter<'a, (MatchRule, VifRef)>,
        Ipv4Addr,
        Ipv4Addr,
    ),
}

impl Iterator for Copies<'_> {
    type Item = VifRef;

    fn next(&mut self) -> Option<VifRef> {
        match &mut self.0 {
            Inner::All(it) => it.next().copied(),
            Inner::Arp(rules, sender, target) => {
                let (s, t) = (*sender, *target);
                rules
                    .find(|(rule, _)| takes_arp(rule, s, t))
                    .map(|(_, r)| *r)
            }
        }
    }
}

/// What demux reads from a frame's L2 headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L2Info {
    /// Outer VLAN id (0 if untagged).
    pub vid: u16,
    /// Offset of the L3 header. (A `u16` although it fits a byte: with two byte-sized fields
    /// side by side the compiler merged their loads across separate stores — a
    /// store-forwarding stall measured at 15 % of the demux loop.)
    pub l3: u16,
    /// L3 class.
    pub class: Class,
}

/// Parse a frame's Ethernet and VLAN headers.
#[inline]
pub fn parse_l2(frame: &[u8]) -> Result<L2Info, Drop> {
    let x = parse_l2_packed(frame);
    if x >> 40 != 0 {
        return Err(Drop::L2Truncated);
    }
    Ok(unpack(x))
}

/// [`parse_l2`] for the demux loop, packed into one integer: vid | l3 << 16 | class << 32,
/// bit 40 set for a truncated frame. Why: returned as a `Result<L2Info, _>` the fields went
/// through memory as single bytes and were read back merged — a store-forwarding stall per
/// packet that measured ~25 % of the demux loop.
#[inline(always)]
pub(crate) fn parse_l2_packed(frame: &[u8]) -> u64 {
    if frame.len() < 14 {
        return 1 << 40;
    }
    let et = EtherType(u16::from_be_bytes([frame[12], frame[13]]));
    let (vid, l3, et) = if et.is_vlan() {
        match vlan::parse_tags(frame) {
            Ok(tags) => (
                tags.outer().map_or(0, |t| t.tci.vid()),
                tags.l3_offset() as u16,
                tags.ethertype(),
            ),
            Err(_) => return 1 << 40,
        }
    } else {
        (0, 14, et)
    };
    let class = match et {
        EtherType::IPV4 => Class::Ipv4,
        EtherType::IPV6 => Class::Ipv6,
        EtherType::ARP => Class::Arp,
        _ => Class::Other,
    };
    u64::from(vid) | u64::from(l3) << 16 | (class as u64) << 32
}

/// The fields of a packed [`parse_l2_packed`] result (not truncated).
#[inline(always)]
pub(crate) fn unpack(x: u64) -> L2Info {
    L2Info {
        vid: x as u16,
        l3: (x >> 16) as u16,
        class: Class::from_u8((x >> 32) as u8),
    }
}

/// The flow key IP rules see, `None` if the frame is not IP or its header cannot be read.
fn ip_key(frame: &[u8], l2: &L2Info) -> Option<FlowKey> {
    let l3 = frame.get(l2.l3 as usize..)?;
    match l2.class {
        Class::Ipv4 => flow_key_v4(l3),
        Class::Ipv6 => flow_key_v6(l3),
        _ => None,
    }
}

/// An ARP frame's sender and target protocol addresses (Ethernet and IPv4 lengths only).
fn arp_addrs(frame: &[u8], l2: &L2Info) -> Option<(Ipv4Addr, Ipv4Addr)> {
    let l3 = frame.get(l2.l3 as usize..)?;
    (l2.class == Class::Arp && l3.len() >= 28 && l3[4] == 6 && l3[5] == 4)
        .then(|| (flow::v4_at(l3, 14), flow::v4_at(l3, 24)))
}

/// Whether `r` takes an ARP frame with these sender and target addresses: only the address
/// fields mean anything to ARP.
fn takes_arp(r: &MatchRule, sender: Ipv4Addr, target: Ipv4Addr) -> bool {
    r.dst.is_none_or(|p| p.contains(IpAddr::V4(target)))
        && r.src.is_none_or(|p| p.contains(IpAddr::V4(sender)))
}

impl PortDemux {
    /// Add a VIF. Errors name the clash.
    pub(crate) fn add(&mut self, cfg: &VifConfig, r: VifRef) -> Result<(), String> {
        let vid = cfg.vlan.unwrap_or(UNTAGGED);
        let key = mac_key(vid, &cfg.mac.0);
        let v = self.vlans.entry(vid).or_default();
        match &cfg.key {
            DemuxKey::Mac => {
                if self.macs.contains(key) || v.whole.is_some_and(|(m, _)| m == cfg.mac) {
                    return Err(format!("MAC {} already used on this port/VLAN", cfg.mac));
                }
                self.macs.insert(key, Target::Vif(r));
            }
            DemuxKey::Vlan => {
                if cfg.vlan.is_none() {
                    return Err("demux key vlan needs a VLAN id".into());
                }
                if v.whole.is_some() {
                    return Err(format!("VLAN {vid} already owned by another VIF"));
                }
                if self.macs.contains(key) {
                    return Err(format!("MAC {} already used on this port/VLAN", cfg.mac));
                }
                v.whole = Some((cfg.mac, r));
            }
            DemuxKey::Rule(_) if v.whole.is_some_and(|(m, _)| m == cfg.mac) => {
                return Err(format!("MAC {} already owns VLAN {vid}", cfg.mac));
            }
            DemuxKey::Rule(rule) => match self.macs.get(key) {
                Some(Target::Vif(_)) => {
                    return Err(format!(
                        "MAC {} is used by a VIF without a rule on this port/VLAN",
                        cfg.mac
                    ));
                }
                Some(Target::Rules) => self.rules.entry(key).or_default().push((rule.clone(), r)),
                None => {
                    self.macs.insert(key, Target::Rules);
                    self.rules.insert(key, vec![(rule.clone(), r)]);
                }
            },
        }
        v.members.push(r);
        Ok(())
    }

    /// Remove a VIF (no-op if absent).
    pub(crate) fn remove(&mut self, cfg: &VifConfig, r: VifRef) {
        let vid = cfg.vlan.unwrap_or(UNTAGGED);
        let key = mac_key(vid, &cfg.mac.0);
        let Some(v) = self.vlans.get_mut(&vid) else {
            return;
        };
        v.members.retain(|m| *m != r);
        if v.whole.is_some_and(|(_, w)| w == r) {
            v.whole = None;
        }
        let empty = match self.macs.get(key) {
            Some(Target::Vif(x)) => x == r,
            Some(Target::Rules) => self.rules.get_mut(&key).is_none_or(|rs| {
                rs.retain(|(_, x)| *x != r);
                rs.is_empty()
            }),
            None => false,
        };
        if empty {
            self.macs.remove(key);
            self.rules.remove(&key);
        }
        if v.members.is_empty() {
            self.vlans.remove(&vid);
        }
    }

    /// Where a frame with these L2 fields goes.
    #[inline]
    pub fn lookup<'a>(&'a self, frame: &[u8], l2: &L2Info) -> Verdict<'a> {
        self.lookup_key(mac_key(l2.vid, frame), frame, l2)
    }

    /// [`PortDemux::lookup_key`] for a MAC that rules share. (Out of line: it is most of
    /// `lookup_key`'s code, and inlined into the demux loop it cost every frame there
    /// registers. Callgrind, `vrbench inproc --flow-cache 0`: 619.3 → 614.3 instructions per
    /// packet for one VR, 760.7 → 755.0 for 100, against the inlined rules before ARP went to
    /// every rule.)
    #[inline(never)]
    fn by_rules<'a>(&'a self, key: u64, frame: &[u8], l2: &L2Info) -> Verdict<'a> {
        let rules = self.rules.get(&key).map_or(&[][..], Vec::as_slice);
        if let Some((sender, target)) = arp_addrs(frame, l2) {
            // Every rule that its addresses satisfy (see the module's docs).
            return if rules.iter().any(|(r, _)| takes_arp(r, sender, target)) {
                Verdict::Arp(ArpRules(rules))
            } else {
                Verdict::Drop(Drop::NoVr)
            };
        }
        let key_of = ip_key(frame, l2);
        rules
            .iter()
            .find(|(rule, _)| match &key_of {
                Some(k) => rule.matches(k),
                // Not IP or ARP, or unreadable: only a rule without fields.
                None => rule.is_any(),
            })
            .map_or(Verdict::Drop(Drop::NoVr), |(_, r)| Verdict::Rule(*r))
    }

    /// [`PortDemux::lookup`] with the frame's [`mac_key`] already computed.
    #[inline]
    pub fn lookup_key<'a>(&'a self, key: u64, frame: &[u8], l2: &L2Info) -> Verdict<'a> {
        if frame[0] & 1 != 0 {
            // Multicast, including broadcast.
            return match self.vlans.get(&l2.vid) {
                Some(v) => Verdict::Flood(&v.members),
                None => Verdict::Drop(Drop::NoVr),
            };
        }
        match self.macs.get(key) {
            Some(Target::Vif(r)) => Verdict::One(r),
            Some(Target::Rules) => self.by_rules(key, frame, l2),
            None => match self.vlans.get(&l2.vid).and_then(|v| v.whole) {
                Some((mac, r)) if mac.0 == frame[..6] => Verdict::One(r),
                _ => Verdict::Drop(Drop::NoVr),
            },
        }
    }
}
