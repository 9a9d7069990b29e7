#!/usr/bin/env python3
"""Write the seed corpora of the wire_ipv6 and wire_l4 fuzz targets from the saved captures.

  python3 crates/wire/testdata/fuzz_seeds.py      # from the repository root

wire_ipv6 takes an IPv6 packet as is. wire_l4 takes a selector byte (bit 0: 0 = IPv4, 1 = IPv6),
the source and destination addresses, then the UDP/TCP segment (see its module docs).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from hex import packets  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.join(HERE, "captures")
FUZZ = os.path.join(HERE, "..", "..", "..", "fuzz", "seeds")


def l3(data):
    """Strip Ethernet; return (ethertype, L3 bytes)."""
    return int.from_bytes(data[12:14], "big"), data[14:]


def main():
    out6 = os.path.join(FUZZ, "wire_ipv6")
    out4 = os.path.join(FUZZ, "wire_l4")
    os.makedirs(out6, exist_ok=True)
    os.makedirs(out4, exist_ok=True)
    for name in sorted(os.listdir(CAPTURES)):
        if not name.endswith(".txt"):
            continue
        for i, (_, data) in enumerate(packets(os.path.join(CAPTURES, name))):
            et, pkt = l3(data)
            stem = f"{name[:-4]}-{i}"
            if et == 0x86DD:
                open(os.path.join(out6, stem), "wb").write(pkt)
                # Upper layer right after the fixed header: UDP (17) or TCP (6).
                if pkt[6] in (6, 17):
                    plen = int.from_bytes(pkt[4:6], "big")
                    seed = b"\x01" + pkt[8:40] + pkt[40 : 40 + plen]
                    open(os.path.join(out4, stem), "wb").write(seed)
            elif et == 0x0800 and pkt[9] in (6, 17):
                ihl = (pkt[0] & 0x0F) * 4
                total = int.from_bytes(pkt[2:4], "big")
                seed = b"\x00" + pkt[12:20] + pkt[ihl:total]
                open(os.path.join(out4, stem), "wb").write(seed)


if __name__ == "__main__":
    main()
