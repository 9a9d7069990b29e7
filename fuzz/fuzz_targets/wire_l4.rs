//! UDP and TCP over both pseudo headers: every view and the TCP option iterator on arbitrary
//! bytes must not panic and must end; a filled checksum verifies; the incremental update after
//! an address rewrite equals a full recomputation; whatever a `Repr` parses must emit into
//! `buffer_len()` bytes and parse back to itself.
//!
//! Input layout: byte 0 bit 0 picks the family (0 = IPv4, 1 = IPv6); then the source and
//! destination addresses (4 + 4 or 16 + 16 bytes); the rest is the segment, tried as UDP and as
//! TCP. The rewritten address is the source with every byte XOR 0x5a.
#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use vrhost_wire::{tcp, udp};

#[derive(Clone, Copy)]
enum Addrs {
    V4(Ipv4Addr, Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr, Ipv6Addr),
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let (addrs, seg) = if sel & 1 == 0 {
        if rest.len() < 8 {
            return;
        }
        let s = u32::from_be_bytes(rest[0..4].try_into().unwrap());
        let d = u32::from_be_bytes(rest[4..8].try_into().unwrap());
        let (s, d, n) = (
            Ipv4Addr::from_bits(s),
            Ipv4Addr::from_bits(d),
            Ipv4Addr::from_bits(s ^ 0x5a5a_5a5a),
        );
        (Addrs::V4(s, d, n), &rest[8..])
    } else {
        if rest.len() < 32 {
            return;
        }
        let s = u128::from_be_bytes(rest[0..16].try_into().unwrap());
        let d = u128::from_be_bytes(rest[16..32].try_into().unwrap());
        let n = s ^ u128::from_be_bytes([0x5a; 16]);
        (
            Addrs::V6(
                Ipv6Addr::from_bits(s),
                Ipv6Addr::from_bits(d),
                Ipv6Addr::from_bits(n),
            ),
            &rest[32..],
        )
    };
    udp_seg(seg, addrs);
    tcp_seg(seg, addrs);
});

fn udp_seg(seg: &[u8], addrs: Addrs) {
    let Ok(p) = udp::Packet::new_checked(seg) else {
        return;
    };
    let _ = (p.src_port(), p.dst_port(), p.checksum());
    assert_eq!(p.payload().len() + udp::HEADER_LEN, usize::from(p.len()));
    assert_eq!(p.datagram().len(), usize::from(p.len()));
    match addrs {
        Addrs::V4(s, d, _) => {
            let ok = p.verify_checksum_v4(s, d);
            if p.checksum() == 0 {
                assert!(ok, "no checksum over IPv4 is valid");
            }
        }
        Addrs::V6(s, d, _) => {
            let ok = p.verify_checksum_v6(s, d);
            if p.checksum() == 0 {
                assert!(!ok, "zero checksum over IPv6 is invalid");
            }
        }
    }

    let mut copy = seg.to_vec();
    let mut m = udp::Packet::new_unchecked(&mut copy[..]);
    match addrs {
        Addrs::V4(s, d, n) => {
            m.fill_checksum_v4(s, d);
            assert!(m.checksum() != 0 && m.verify_checksum_v4(s, d));
            m.update_checksum_for_addr_v4(s, n);
            let inc = m.checksum();
            m.fill_checksum_v4(n, d);
            assert_eq!(inc, m.checksum(), "incremental == full (v4)");
            m.set_checksum(0);
            m.update_checksum_for_addr_v4(n, s);
            assert_eq!(m.checksum(), 0, "an absent checksum stays absent");
        }
        Addrs::V6(s, d, n) => {
            m.fill_checksum_v6(s, d);
            assert!(m.checksum() != 0 && m.verify_checksum_v6(s, d));
            m.update_checksum_for_addr_v6(d, n);
            let inc = m.checksum();
            m.fill_checksum_v6(s, n);
            assert_eq!(inc, m.checksum(), "incremental == full (v6)");
        }
    }

    let repr = udp::Repr::parse(&p).expect("checked view parses");
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut udp::Packet::new_unchecked(&mut buf[..]));
    assert_eq!(
        udp::Repr::parse(&udp::Packet::new_checked(&buf[..]).unwrap()),
        Ok(repr)
    );
}

fn tcp_seg(seg: &[u8], addrs: Addrs) {
    let Ok(p) = tcp::Packet::new_checked(seg) else {
        return;
    };
    let _ = (
        p.src_port(),
        p.dst_port(),
        p.seq_number(),
        p.ack_number(),
        p.data_offset(),
    );
    let _ = (
        p.flags(),
        p.fin(),
        p.syn(),
        p.rst(),
        p.psh(),
        p.ack(),
        p.urg(),
        p.ece(),
        p.cwr(),
    );
    let _ = (p.ns(), p.window_len(), p.checksum(), p.urgent_at());
    assert_eq!(p.options().len() + tcp::HEADER_LEN, p.header_len());
    assert_eq!(p.header_len() + p.payload().len(), seg.len());
    let mut n = 0;
    for o in p.options_iter() {
        n += 1;
        assert!(n <= tcp::MAX_OPTIONS_LEN, "option iterator does not end");
        if let Ok(o) = o {
            let mut buf = vec![0u8; o.buffer_len()];
            o.emit(&mut buf);
            assert_eq!(tcp::TcpOptions::new(&buf).next(), Some(Ok(o)));
            if let tcp::TcpOption::Sack(b) = o {
                assert!(b.iter().count() <= 4);
            }
        }
    }

    let mut copy = seg.to_vec();
    let mut m = tcp::Packet::new_unchecked(&mut copy[..]);
    match addrs {
        Addrs::V4(s, d, n) => {
            let _ = p.verify_checksum_v4(s, d);
            m.fill_checksum_v4(s, d);
            assert!(m.verify_checksum_v4(s, d));
            m.update_checksum_for_addr_v4(d, n);
            let inc = m.checksum();
            m.fill_checksum_v4(s, n);
            assert_eq!(inc, m.checksum(), "incremental == full (v4)");
        }
        Addrs::V6(s, d, n) => {
            let _ = p.verify_checksum_v6(s, d);
            m.fill_checksum_v6(s, d);
            assert!(m.verify_checksum_v6(s, d));
            m.update_checksum_for_addr_v6(s, n);
            let inc = m.checksum();
            m.fill_checksum_v6(n, d);
            assert_eq!(inc, m.checksum(), "incremental == full (v6)");
        }
    }

    let Ok(repr) = tcp::Repr::parse(&p) else {
        return;
    };
    let _ = repr.options.mss();
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut tcp::Packet::new_unchecked(&mut buf[..]));
    let again = tcp::Packet::new_checked(&buf[..]).expect("emitted header passes the checks");
    assert_eq!(tcp::Repr::parse(&again), Ok(repr));
}
