#!/usr/bin/env python3
"""Turn one packet of a saved capture (the `tcpdump -xx -v` text the capture scripts print) into
golden bytes for the tests: a Rust array literal, or a binary file for packets too long to inline.

  python3 crates/wire/testdata/hex.py CAPTURE.txt N              # packet N (0-based) as Rust
  python3 crates/wire/testdata/hex.py CAPTURE.txt N --bin OUT    # … written to OUT
  python3 crates/wire/testdata/hex.py CAPTURE.txt --list         # one summary line per packet

The 14-byte Ethernet header is stripped: the golden bytes start at the IP header.
"""
import re
import sys

HEX_LINE = re.compile(r"^\s+0x([0-9a-f]{4}):\s+((?:[0-9a-f]{2,4}\s?)+)")


def packets(path):
    """(summary line, bytes) for each packet in the file."""
    out = []
    summary, data = None, None
    for line in open(path):
        m = HEX_LINE.match(line)
        if m and summary is not None and line.startswith("\t0x"):
            # Only the frame dump is tab + "0x"; option dumps from -v are indented deeper.
            data += bytes.fromhex(m.group(2).replace(" ", ""))
        elif re.match(r"^\d\d:\d\d:\d\d\.\d+ ", line):
            if summary is not None:
                out.append((summary, data))
            summary, data = line.strip(), b""
    if summary is not None:
        out.append((summary, data))
    return out


def main():
    pkts = packets(sys.argv[1])
    if sys.argv[2] == "--list":
        for i, (s, d) in enumerate(pkts):
            print(i, len(d) - 14, s[:160])
        return
    _, data = pkts[int(sys.argv[2])]
    data = data[14:]
    if len(sys.argv) > 4 and sys.argv[3] == "--bin":
        open(sys.argv[4], "wb").write(data)
        return
    print(f"// {len(data)} bytes")
    for i in range(0, len(data), 16):
        print("    " + " ".join(f"0x{b:02x}," for b in data[i : i + 16]))


if __name__ == "__main__":
    main()
