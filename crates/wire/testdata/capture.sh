#!/usr/bin/env bash
# How the golden bytes in crates/wire were made: real frames between two network namespaces
# joined by a veth pair, captured with tcpdump and printed as hex. Run as root:
#   bash crates/wire/testdata/capture.sh 'arping -c1 -I va 10.99.0.2'  [tcpdump filter]
# Traffic stays inside the two namespaces it creates (and removes on exit).
set -euo pipefail
cmd=${1:?command to run in namespace a}
filter=${2:-}
a=wirecap-a-$$; b=wirecap-b-$$
trap 'ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null' EXIT
ip netns add $a; ip netns add $b
ip link add va netns $a type veth peer name vb netns $b
ip -n $a link set va address 02:00:00:00:00:0a; ip -n $b link set vb address 02:00:00:00:00:0b
ip -n $a addr add 10.99.0.1/24 dev va; ip -n $b addr add 10.99.0.2/24 dev vb
ip -n $a addr add fd00:99::1/64 dev va nodad; ip -n $b addr add fd00:99::2/64 dev vb nodad
for n in $a $b; do ip -n $n link set lo up; done
ip -n $a link set va up; ip -n $b link set vb up
ip netns exec $b sh -c 'command -v iperf3 >/dev/null && iperf3 -s -D -1 >/dev/null 2>&1 || true'
ip netns exec $a tcpdump -i va -U -w /tmp/$a.pcap $filter 2>/dev/null &
tp=$!; sleep 1
ip netns exec $a sh -c "$cmd" || true
sleep 1; kill $tp; wait $tp 2>/dev/null || true
tcpdump -r /tmp/$a.pcap -nn -e -xx -v 2>/dev/null
rm -f /tmp/$a.pcap
