//! Ethernet, VLAN tags and ARP: every view on arbitrary bytes must not panic, the tag walker
//! must stay inside the frame, push/pop must be exact inverses, and whatever a `Repr` parses
//! must emit into `buffer_len()` bytes and parse back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vrhost_wire::{EtherType, arp, ethernet, vlan};

fn ethernet(data: &[u8]) {
    let Ok(frame) = ethernet::Frame::new_checked(data) else {
        return;
    };
    let _ = (
        frame.dst_addr(),
        frame.src_addr(),
        frame.ethertype(),
        frame.payload().len(),
    );
    let _ = (
        frame.dst_addr().is_broadcast(),
        frame.src_addr().is_multicast(),
    );
    let repr = ethernet::Repr::parse(&frame).expect("a checked frame parses");
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ethernet::Frame::new_unchecked(&mut buf[..]));
    assert_eq!(
        ethernet::Repr::parse(&ethernet::Frame::new_unchecked(&buf[..])),
        Ok(repr)
    );
    assert_eq!(&buf[..], &data[..ethernet::HEADER_LEN]);
}

fn vlan_view(data: &[u8]) {
    let Ok(tag) = vlan::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        tag.tci(),
        tag.pcp(),
        tag.dei(),
        tag.vid(),
        tag.ethertype(),
        tag.payload().len(),
    );
    let repr = vlan::Repr::parse(&tag).expect("a checked tag parses");
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut vlan::Packet::new_unchecked(&mut buf[..]));
    assert_eq!(
        vlan::Repr::parse(&vlan::Packet::new_unchecked(&buf[..])),
        Ok(repr)
    );
    assert_eq!(&buf[..], &data[..vlan::HEADER_LEN]);
}

fn tags(data: &[u8]) -> Option<usize> {
    let t = vlan::parse_tags(data).ok()?;
    assert!(t.len() <= vlan::MAX_TAGS && t.tags().len() == t.len());
    assert_eq!(
        t.l3_offset(),
        ethernet::HEADER_LEN + vlan::TAG_LEN * t.len()
    );
    assert!(t.l3_offset() <= data.len());
    assert!(!t.ethertype().is_vlan());
    let _ = (t.outer(), t.inner(), t.vids(), t.is_empty());
    Some(t.l3_offset())
}

/// Push a tag made from the frame's own bytes, pop it again: the frame must come back.
fn push_pop(data: &[u8]) {
    let head = 4 + data.first().map_or(0, |b| usize::from(b % 4));
    let mut buf = vec![0xa5u8; head + data.len()];
    buf[head..].copy_from_slice(data);
    let tci = vlan::Tci(u16::from_be_bytes([
        data.get(1).copied().unwrap_or(0),
        data.len() as u8,
    ]));
    let tag = if data.len().is_multiple_of(2) {
        vlan::Tag::c_tag(tci)
    } else {
        vlan::Tag::s_tag(tci)
    };
    match vlan::push_tag(&mut buf, head, data.len(), tag) {
        Ok(start) => {
            assert_eq!(start, head - vlan::TAG_LEN);
            let (popped, start) = vlan::pop_tag(&mut buf, start, data.len() + 4).unwrap();
            assert_eq!((popped, start), (tag, head));
            assert_eq!(&buf[head..], data);
        }
        Err(_) => assert!(data.len() < ethernet::HEADER_LEN),
    }
    // Popping whatever the input has must either fail cleanly or leave a frame 4 bytes
    // shorter whose payload did not move.
    let mut buf = data.to_vec();
    if let Ok((_, start)) = vlan::pop_tag(&mut buf, 0, data.len()) {
        assert_eq!(start, 4);
        assert_eq!(&buf[4..16], &data[..12]);
        assert_eq!(&buf[16..], &data[16..]);
    }
}

fn arp(data: &[u8]) {
    let Ok(p) = arp::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.hardware_type(),
        p.protocol_type(),
        p.hardware_len(),
        p.protocol_len(),
    );
    let _ = (p.operation(), p.packet_len());
    let _ = (p.sender_hardware_addr(), p.sender_protocol_addr());
    let _ = (p.target_hardware_addr(), p.target_protocol_addr());
    let Ok(repr) = arp::Repr::parse(&p) else {
        return;
    };
    let _ = (repr.is_gratuitous(), repr.reply(repr.sender_hardware_addr));
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut arp::Packet::new_unchecked(&mut buf[..]));
    assert_eq!(
        arp::Repr::parse(&arp::Packet::new_checked(&buf[..]).unwrap()),
        Ok(repr)
    );
    assert_eq!(&buf[..], &data[..arp::ETHERNET_IPV4_LEN]);
}

fuzz_target!(|data: &[u8]| {
    ethernet(data);
    vlan_view(data);
    arp(data);
    push_pop(data);
    if let Some(l3) = tags(data) {
        vlan_view(&data[ethernet::HEADER_LEN..]);
        let ethertype = vlan::parse_tags(data).unwrap().ethertype();
        if ethertype == EtherType::ARP {
            arp(&data[l3..]);
        }
    }
    if data.len() > ethernet::HEADER_LEN {
        arp(&data[ethernet::HEADER_LEN..]);
    }
});
