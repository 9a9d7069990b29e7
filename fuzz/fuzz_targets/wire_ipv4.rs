//! IPv4 and ICMPv4: every view on arbitrary bytes must not panic, the options iterator must
//! end, the in-place rewrites must keep a good checksum good, and whatever a `Repr` parses must
//! emit into `buffer_len()` bytes (plus the payload) and parse back to itself.
#![no_main]

use std::net::Ipv4Addr;

use libfuzzer_sys::fuzz_target;
use vrhost_wire::ip::Protocol;
use vrhost_wire::{icmpv4, ipv4};

fn ipv4(data: &[u8]) {
    // The quote-style check first: it must agree with the full one and make the getters safe.
    let view = ipv4::Packet::new_unchecked(data);
    if view.check_header().is_ok() {
        header_getters(&view);
    }
    let Ok(p) = ipv4::Packet::new_checked(data) else {
        return;
    };
    assert!(view.check_header().is_ok());
    header_getters(&p);
    assert!(p.payload().len() + p.header_len() == usize::from(p.total_len()));

    // In-place rewrites on a copy: a header that verified still verifies.
    let mut copy = data.to_vec();
    let mut m = ipv4::Packet::new_unchecked(&mut copy[..]);
    let good = m.verify_checksum();
    let ttl = m.ttl();
    assert_eq!(m.decrement_ttl(), ttl.saturating_sub(1));
    m.set_src_addr_incremental(Ipv4Addr::from_bits(u32::from(ttl) * 0x0101_0101));
    m.set_dst_addr_incremental(Ipv4Addr::new(10, 0, 0, ttl));
    if good {
        assert!(
            m.verify_checksum(),
            "incremental update broke a good checksum"
        );
    }
    m.fill_checksum();
    assert!(m.verify_checksum());

    let Ok(repr) = ipv4::Repr::parse(&p) else {
        return;
    };
    let _ = repr.pseudo_header_sum();
    let payload = p.payload();
    assert_eq!(repr.payload_len, payload.len());
    let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
    repr.emit(&mut ipv4::Packet::new_unchecked(&mut buf[..]));
    buf[repr.buffer_len()..].copy_from_slice(payload);
    let again = ipv4::Packet::new_checked(&buf[..]).expect("emitted header passes the checks");
    assert_eq!(ipv4::Repr::parse(&again), Ok(repr));
    // Byte-exact apart from the reserved flag (not in the Repr) and hence the checksum.
    assert_eq!(&buf[..6], &data[..6]);
    assert_eq!(buf[6] & 0x7f, data[6] & 0x7f);
    assert_eq!(&buf[7..10], &data[7..10]);
    assert_eq!(&buf[12..], &data[12..usize::from(p.total_len())]);

    if repr.protocol == Protocol::ICMP {
        icmpv4(payload);
    }
}

fn header_getters<T: AsRef<[u8]>>(p: &ipv4::Packet<T>) {
    let _ = (
        p.version(),
        p.ihl(),
        p.header_len(),
        p.dscp(),
        p.ecn(),
        p.total_len(),
    );
    let _ = (
        p.ident(),
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.is_fragment(),
    );
    let _ = (
        p.ttl(),
        p.protocol(),
        p.checksum(),
        p.src_addr(),
        p.dst_addr(),
    );
    let _ = (
        p.has_options(),
        p.options().len(),
        p.payload().len(),
        p.verify_checksum(),
    );
    let _ = p.pseudo_header_sum();
    let mut n = 0;
    for o in p.options_iter() {
        n += 1;
        assert!(n <= ipv4::MAX_OPTIONS_LEN, "options iterator does not end");
        if let Ok(o) = o {
            let _ = (
                o.kind.copied(),
                o.kind.class(),
                o.kind.number(),
                o.data.len(),
            );
        }
    }
    let _ = icmpv4::may_send_error(p);
}

fn icmpv4(data: &[u8]) {
    let Ok(p) = icmpv4::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.msg_type(),
        p.msg_code(),
        p.checksum(),
        p.rest_of_header(),
        p.data().len(),
    );
    let _ = (
        p.echo_ident(),
        p.echo_seq_no(),
        p.next_hop_mtu(),
        p.verify_checksum(),
    );
    let _ = p.msg_type().is_error();
    if let Ok(repr) = icmpv4::Repr::parse(&p) {
        let _ = (repr.echo_reply(), repr.msg_type());
        if let Some(inv) = repr.invoking() {
            header_getters(&inv);
        }
        roundtrip(&repr);
    }
    // Build errors about these bytes as if they were an offending datagram.
    let reason = icmpv4::DstUnreachable::FragRequired {
        next_hop_mtu: data.len() as u16,
    };
    if let Ok(repr) = icmpv4::Repr::dst_unreachable(reason, data) {
        assert!(repr.buffer_len() <= icmpv4::MAX_ERROR_DATAGRAM_LEN - ipv4::HEADER_LEN);
        roundtrip(&repr);
    }
    if let Ok(repr) = icmpv4::Repr::time_exceeded(icmpv4::TimeExceeded::TtlExpired, data) {
        roundtrip(&repr);
    }
}

fn roundtrip(repr: &icmpv4::Repr<'_>) {
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut icmpv4::Packet::new_unchecked(&mut buf[..]));
    let p = icmpv4::Packet::new_checked(&buf[..]).expect("emitted message has a header");
    assert!(p.verify_checksum());
    assert_eq!(icmpv4::Repr::parse(&p).as_ref(), Ok(repr));
}

fuzz_target!(|data: &[u8]| {
    ipv4(data);
    icmpv4(data);
    // Behind an Ethernet header, as the data plane sees it.
    if data.len() > 14 {
        ipv4(&data[14..]);
    }
});
