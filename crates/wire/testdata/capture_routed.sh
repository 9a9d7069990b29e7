#!/usr/bin/env bash
# Like capture.sh, but with a router in the middle and checksum offload off, for the golden bytes
# of udp.rs, tcp.rs, ipv6.rs and icmpv6.rs. Run as root:
#   bash crates/wire/testdata/capture_routed.sh 'COMMAND run in namespace a' [tcpdump filter]
#
#   a (va) ──────────── (ra) r (rc) ══ MTU 1280 ══ (vc) c
#   10.99.0.1/24             10.99.0.254 10.98.0.254        10.98.0.2/24
#   fd00:99::1/64            fd00:99::fe fd00:98::fe        fd00:98::2/64
#   02:00:00:00:00:0a        …:fa        …:fc               02:00:00:00:00:0c
#
# Why not capture.sh: veth offloads the TCP/UDP checksum, so tcpdump on the sender sees a
# partial (wrong) checksum; here `ethtool -K tx off` makes the kernel fill it in software. The
# router r is what sends ICMPv6 Packet Too Big (the r–c link has MTU 1280) and Time Exceeded
# (hop limit 1); c runs `iperf3 -s -1` if installed and has no other listener, so UDP to any
# other port gets Port Unreachable. Capture is on va in namespace a. Traffic stays inside the
# three namespaces this script creates (and removes on exit).
set -euo pipefail
cmd=${1:?command to run in namespace a}
filter=${2:-}
a=wirecap-a-$$; r=wirecap-r-$$; c=wirecap-c-$$
trap 'for n in $a $r $c; do ip netns del $n 2>/dev/null; done' EXIT
for n in $a $r $c; do ip netns add $n; ip -n $n link set lo up; done
ip link add va netns $a type veth peer name ra netns $r
ip link add vc netns $c type veth peer name rc netns $r
ip -n $a link set va address 02:00:00:00:00:0a; ip -n $r link set ra address 02:00:00:00:00:fa
ip -n $c link set vc address 02:00:00:00:00:0c; ip -n $r link set rc address 02:00:00:00:00:fc
ip -n $r link set rc mtu 1280; ip -n $c link set vc mtu 1280
ip -n $a addr add 10.99.0.1/24 dev va; ip -n $a addr add fd00:99::1/64 dev va nodad
ip -n $r addr add 10.99.0.254/24 dev ra; ip -n $r addr add fd00:99::fe/64 dev ra nodad
ip -n $r addr add 10.98.0.254/24 dev rc; ip -n $r addr add fd00:98::fe/64 dev rc nodad
ip -n $c addr add 10.98.0.2/24 dev vc; ip -n $c addr add fd00:98::2/64 dev vc nodad
ip netns exec $a ethtool -K va tx off >/dev/null
ip netns exec $r ethtool -K ra tx off >/dev/null; ip netns exec $r ethtool -K rc tx off >/dev/null
ip netns exec $c ethtool -K vc tx off >/dev/null
ip -n $a link set va up; ip -n $r link set ra up; ip -n $r link set rc up; ip -n $c link set vc up
ip netns exec $r sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
ip -n $a route add default via 10.99.0.254; ip -n $a -6 route add default via fd00:99::fe
ip -n $c route add default via 10.98.0.254; ip -n $c -6 route add default via fd00:98::fe
ip netns exec $c sh -c 'command -v iperf3 >/dev/null && iperf3 -s -D -1 >/dev/null 2>&1 || true'
ip netns exec $a tcpdump -i va -U -w /tmp/$a.pcap $filter 2>/dev/null &
tp=$!; sleep 1
ip netns exec $a sh -c "$cmd" || true
sleep 1; kill $tp; wait $tp 2>/dev/null || true
tcpdump -r /tmp/$a.pcap -nn -e -xx -v 2>/dev/null
rm -f /tmp/$a.pcap
