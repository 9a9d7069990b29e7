#!/usr/bin/env bash
# Like capture.sh, but with a router namespace in the middle, for the ICMP errors a router sends
# (TTL exceeded, fragmentation needed, unreachable). Run as root:
#   bash crates/wire/testdata/capture_router.sh 'ping -c1 -t1 10.99.1.2' [tcpdump filter]
# Topology (all in namespaces this script creates and removes on exit):
#   a: va 10.99.0.1/24 (02:00:00:00:00:0a), default via 10.99.0.254
#   r: ra 10.99.0.254/24 (02:00:00:00:00:01), rb 10.99.1.254/24 (02:00:00:00:00:02, mtu 1280),
#      ip_forward=1, `ip route add unreachable 10.99.2.0/24` (answers "host unreachable"),
#      `ip route add prohibit 10.99.3.0/24` ("administratively prohibited"), and no default
#      route (anything else outside 10.99.0-1.x: "net unreachable")
#   b: vb 10.99.1.2/24 (02:00:00:00:00:0b), default via 10.99.1.254
# Captures on a's va, so it shows what a sent and what came back. Options (environment):
#   CAPTURE_B=1  also capture on b's vb and print that after a's capture (what r forwarded:
#                TTL decremented, checksum updated by the kernel)
#   SNAT=1       r masquerades what it forwards to b (source becomes 10.99.1.254); needs the
#                nft tool (apt-get install nftables)
set -euo pipefail
cmd=${1:?command to run in namespace a}
filter=${2:-}
a=wirecap-a-$$; r=wirecap-r-$$; b=wirecap-b-$$
trap 'for n in $a $r $b; do ip netns del $n 2>/dev/null; done' EXIT
ip netns add $a; ip netns add $r; ip netns add $b
ip link add va netns $a type veth peer name ra netns $r
ip link add vb netns $b type veth peer name rb netns $r
ip -n $a link set va address 02:00:00:00:00:0a; ip -n $r link set ra address 02:00:00:00:00:01
ip -n $b link set vb address 02:00:00:00:00:0b; ip -n $r link set rb address 02:00:00:00:00:02
ip -n $r link set rb mtu 1280; ip -n $b link set vb mtu 1280
ip -n $a addr add 10.99.0.1/24 dev va; ip -n $r addr add 10.99.0.254/24 dev ra
ip -n $r addr add 10.99.1.254/24 dev rb; ip -n $b addr add 10.99.1.2/24 dev vb
for n in $a $r $b; do ip -n $n link set lo up; done
ip -n $a link set va up; ip -n $r link set ra up; ip -n $r link set rb up; ip -n $b link set vb up
ip -n $a route add default via 10.99.0.254; ip -n $b route add default via 10.99.1.254
ip -n $r route add unreachable 10.99.2.0/24; ip -n $r route add prohibit 10.99.3.0/24
ip netns exec $r sysctl -qw net.ipv4.ip_forward=1
# Linux rate-limits ICMP errors per destination; one error per test does not hit the limit.
if [ "${SNAT:-}" = 1 ]; then
  ip netns exec $r nft 'add table ip nat; add chain ip nat post { type nat hook postrouting priority 100; }; add rule ip nat post oifname "rb" masquerade'
fi
ip netns exec $a tcpdump -i va -U -w /tmp/$a.pcap $filter 2>/dev/null &
tp=$!
tpb=
if [ "${CAPTURE_B:-}" = 1 ]; then
  ip netns exec $b tcpdump -i vb -U -w /tmp/$b.pcap $filter 2>/dev/null &
  tpb=$!
fi
sleep 1
ip netns exec $a sh -c "$cmd" || true
sleep 1; kill $tp $tpb; wait $tp $tpb 2>/dev/null || true
tcpdump -r /tmp/$a.pcap -nn -e -xx -v 2>/dev/null
rm -f /tmp/$a.pcap
if [ -n "$tpb" ]; then
  echo "## capture on vb (namespace b)"
  tcpdump -r /tmp/$b.pcap -nn -e -xx -v 2>/dev/null
  rm -f /tmp/$b.pcap
fi
