#!/usr/bin/env python3
"""Send one packet of a kind the usual tools do not make, for the golden bytes in crates/wire.

Run inside a capture script's namespace a, e.g.
  bash crates/wire/testdata/capture_routed.sh 'python3 crates/wire/testdata/send.py udp6-closed' udp
Kinds:
  udp6-closed   one UDP datagram to fd00:98::2 port 9 (closed: c answers Port Unreachable)
  udp4-nocsum   one UDP datagram to 10.98.0.2 port 9 with SO_NO_CHECK (checksum field 0)
  udp6-opts     one UDP datagram to fd00:98::2 port 9 carrying a Hop-by-Hop header (Router
                Alert + PadN) and a Destination Options header (PadN), set by ancillary data
  udp6-frag     one 3000-byte UDP datagram to fd00:98::2 port 9 (the kernel fragments it)
"""
import socket
import sys

SO_NO_CHECK = 11  # <asm-generic/socket.h>; Python does not export it


def main(kind: str) -> None:
    if kind == "udp6-closed":
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.sendto(b"vrhost wire golden", ("fd00:98::2", 9))
    elif kind == "udp4-nocsum":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
        s.sendto(b"no checksum", ("10.98.0.2", 9))
    elif kind == "udp6-opts":
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        # Extension headers as the kernel wants them: next-header byte (overwritten by the
        # kernel), length in 8-byte units minus one, then the options.
        hbh = bytes([0, 0, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00])  # Router Alert (MLD), PadN(0)
        dst = bytes([0, 0, 0x01, 0x04, 0, 0, 0, 0])  # PadN(4)
        s.sendmsg(
            [b"with options"],
            [
                (socket.IPPROTO_IPV6, socket.IPV6_HOPOPTS, hbh),
                (socket.IPPROTO_IPV6, socket.IPV6_DSTOPTS, dst),
            ],
            0,
            ("fd00:98::2", 9),
        )
    elif kind == "udp6-frag":
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.sendto(bytes(i % 251 for i in range(3000)), ("fd00:98::2", 9))
    else:
        sys.exit(f"unknown kind {kind!r}; see the docstring")


if __name__ == "__main__":
    main(sys.argv[1])
