//! IPv6, its extension headers and ICMPv6: every view and iterator on arbitrary bytes must not
//! panic and must end, and whatever a `Repr` parses must emit into `buffer_len()` bytes (plus
//! the payload, for the fixed header) and parse back to itself. The bytes are tried both as an
//! IPv6 packet and as a bare ICMPv6 message.
#![no_main]

use std::net::Ipv6Addr;

use libfuzzer_sys::fuzz_target;
use vrhost_wire::icmpv6::{self, ErrorMessage, NdpOption};
use vrhost_wire::ip::Protocol;
use vrhost_wire::ipv6::{self, ExtHeader, ExtHeaderRepr, FragmentHeader, FragmentRepr};

fuzz_target!(|data: &[u8]| {
    ipv6_packet(data);
    let src: Ipv6Addr = "fe80::1".parse().unwrap();
    icmp(data, src, "ff02::1".parse().unwrap());
});

fn ipv6_packet(data: &[u8]) {
    let Ok(p) = ipv6::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.version(),
        p.traffic_class(),
        p.dscp(),
        p.ecn(),
        p.flow_label(),
    );
    let _ = (
        p.payload_len(),
        p.next_header(),
        p.hop_limit(),
        p.src_addr(),
        p.dst_addr(),
    );
    assert_eq!(p.packet().len(), p.total_len());
    assert_eq!(p.payload().len() + ipv6::HEADER_LEN, p.total_len());

    // The extension-header walk: bounded, and every header it yields is inside the packet.
    let mut n = 0;
    for h in p.ext_headers() {
        n += 1;
        assert!(n <= ipv6::MAX_EXT_HEADERS + 1, "walk does not end");
        let Ok(h) = h else { continue };
        assert!(h.offset + h.bytes.len() <= p.total_len());
        assert!(h.bytes.len() >= 8);
        let _ = (h.next_header(), h.data().len(), h.routing());
        if let Some(opts) = h.options() {
            let mut k = 0;
            for o in opts {
                k += 1;
                assert!(k <= h.bytes.len(), "option iterator does not end");
                if let Ok(o) = o {
                    let _ = (o.kind(), ipv6::OptionAction::of(o.kind()));
                    let mut buf = vec![0u8; o.buffer_len()];
                    o.emit(&mut buf);
                }
            }
        }
        match h.kind {
            Protocol::IPV6_FRAG => {
                let v = FragmentHeader::new_checked(h.bytes).expect("8 bytes");
                let r = FragmentRepr::parse(&v).unwrap();
                assert_eq!(h.fragment(), Some(r));
                let _ = (r.byte_offset(), r.is_first(), r.is_atomic());
                let mut buf = [0u8; 8];
                r.emit(&mut FragmentHeader::new_unchecked(&mut buf[..]));
                assert_eq!(
                    FragmentRepr::parse(&FragmentHeader::new_unchecked(&buf[..])),
                    Ok(r)
                );
            }
            Protocol::AH => {}
            _ => {
                let v = ExtHeader::new_checked(h.bytes).expect("walked headers are whole");
                let _ = (
                    v.next_header(),
                    v.hdr_ext_len(),
                    v.header_len(),
                    v.routing_type(),
                );
                let _ = (v.segments_left(), v.options().count());
                let r = ExtHeaderRepr::parse(&v).unwrap();
                let mut buf = vec![0u8; r.buffer_len()];
                r.emit(&mut ExtHeader::new_unchecked(&mut buf[..]));
                assert_eq!(&buf[..], h.bytes);
                assert_eq!(
                    ExtHeaderRepr::parse(&ExtHeader::new_checked(&buf[..]).unwrap()),
                    Ok(r)
                );
            }
        }
    }
    let _ = p.router_alert();
    let ul = p.upper_layer();
    assert_eq!(ul, p.ext_headers().upper_layer());
    let ul = ul.ok();
    if let Some(ul) = ul {
        assert!(ul.offset <= p.total_len());
        let _ = ul.has_header();
    }

    // In-place rewrite on a copy.
    let mut copy = data.to_vec();
    let mut m = ipv6::Packet::new_unchecked(&mut copy[..]);
    let hl = m.hop_limit();
    match m.decrement_hop_limit() {
        Some(n) => assert!(hl > 1 && n == hl - 1 && m.hop_limit() == n),
        None => assert!(hl <= 1 && m.hop_limit() == hl),
    }

    let repr = ipv6::Repr::parse(&p).expect("checked view parses");
    let mut buf = vec![0u8; repr.buffer_len() + repr.payload_len];
    repr.emit(&mut ipv6::Packet::new_unchecked(&mut buf[..]));
    buf[repr.buffer_len()..].copy_from_slice(p.payload());
    assert_eq!(
        &buf[..],
        p.packet(),
        "the fixed header round-trips byte for byte"
    );
    assert_eq!(
        ipv6::Repr::parse(&ipv6::Packet::new_checked(&buf[..]).unwrap()),
        Ok(repr)
    );

    if let Some(ul) = ul
        && ul.protocol == Protocol::ICMPV6
        && ul.has_header()
    {
        icmp(&p.packet()[ul.offset..], p.src_addr(), p.dst_addr());
    }
}

fn icmp(data: &[u8], src: Ipv6Addr, dst: Ipv6Addr) {
    let kinds = [
        ErrorMessage::TimeExceeded(icmpv6::TimeExceededCode::HOP_LIMIT),
        ErrorMessage::PacketTooBig { mtu: 1280 },
        ErrorMessage::ParamProblem {
            code: icmpv6::ParamProblemCode::UNRECOGNIZED_OPTION,
            pointer: 6,
        },
    ];
    // Any bytes as an invoking packet: the permission check and the error builder hold up, and
    // the error is a valid packet of at most 1280 bytes.
    for kind in kinds {
        let _ = icmpv6::error_permitted(data, kind);
    }
    let mut out = [0u8; 1500];
    let n = icmpv6::emit_error(&mut out, src, dst, 64, kinds[0], data).unwrap();
    assert!(n <= ipv6::MIN_MTU && n == 48 + data.len().min(icmpv6::MAX_INVOKING_LEN));
    let e = ipv6::Packet::new_checked(&out[..n]).unwrap();
    let ep = icmpv6::Packet::new_checked(e.payload()).unwrap();
    assert!(ep.verify_checksum(src, dst));
    assert!(matches!(
        icmpv6::Repr::parse(&ep),
        Ok(icmpv6::Repr::TimeExceeded { .. })
    ));

    let Ok(p) = icmpv6::Packet::new_checked(data) else {
        return;
    };
    let _ = (
        p.msg_type(),
        p.msg_type().is_error(),
        p.msg_code(),
        p.checksum(),
        p.echo_ident(),
    );
    let _ = (
        p.echo_seq_no(),
        p.word(),
        p.mtu(),
        p.pointer(),
        p.neighbor_flags(),
    );
    let _ = (
        p.target_addr(),
        p.ra_hop_limit(),
        p.router_flags(),
        p.router_lifetime(),
    );
    let _ = (
        p.reachable_time(),
        p.retrans_time(),
        p.body().len(),
        p.ndp_options().len(),
    );
    let good = p.verify_checksum(src, dst);
    let mut k = 0;
    for o in p.ndp_options_iter() {
        k += 1;
        assert!(k <= data.len() / 8 + 1, "ND option iterator does not end");
        if let Ok(o) = o {
            let mut buf = vec![0u8; o.buffer_len()];
            o.emit(&mut buf);
            if !matches!(
                o,
                NdpOption::Unknown { .. } | NdpOption::RedirectedHeader(_)
            ) {
                let again = icmpv6::NdpOptions::new(&buf).next();
                assert_eq!(again, Some(Ok(o)));
            }
        }
    }

    let mut copy = data.to_vec();
    let mut m = icmpv6::Packet::new_unchecked(&mut copy[..]);
    m.fill_checksum(src, dst);
    assert!(m.verify_checksum(src, dst));
    if good {
        // …up to the two one's-complement zeros: a sender's 0xffff verifies where fill
        // computes 0 (and vice versa).
        let (a, b) = (m.checksum(), p.checksum());
        assert!(
            a == b || (a | b == 0xffff && a & b == 0),
            "a good checksum is what fill computes"
        );
    }

    let Ok(repr) = icmpv6::Repr::parse(&p) else {
        return;
    };
    let _ = repr.check_ndp(src, dst, 255);
    assert_eq!(repr.msg_type(), p.msg_type());
    let mut buf = vec![0u8; repr.buffer_len()];
    let mut q = icmpv6::Packet::new_unchecked(&mut buf[..]);
    repr.emit(&mut q);
    q.fill_checksum(src, dst);
    let q = icmpv6::Packet::new_checked(&buf[..]).expect("emitted message passes the checks");
    assert!(q.verify_checksum(src, dst));
    assert_eq!(icmpv6::Repr::parse(&q), Ok(repr));

    // The same through the whole-packet builder.
    let mut pkt = vec![0u8; 40 + repr.buffer_len()];
    let n = icmpv6::emit_packet(&mut pkt, src, dst, 255, &repr).unwrap();
    let ip = ipv6::Packet::new_checked(&pkt[..n]).unwrap();
    assert_eq!(ip.upper_layer().unwrap().protocol, Protocol::ICMPV6);
    let inner = icmpv6::Packet::new_checked(ip.payload()).unwrap();
    assert!(inner.verify_checksum(src, dst));
    assert_eq!(icmpv6::Repr::parse(&inner), Ok(repr));
}
