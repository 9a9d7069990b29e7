#!/usr/bin/env bash
# Like capture.sh, but a's frames leave va carrying VLAN tags, for 802.1Q / QinQ golden bytes.
# Run as root:
#   bash crates/wire/testdata/capture_vlan.sh '0x8100:0xa00a' 'ping -c1 -s 8 10.99.0.2' [filter]
#   bash crates/wire/testdata/capture_vlan.sh '0x8100:0x6014 0x88a8:0x1064' 'ping …' [filter]
# The first argument lists TPID:TCI pairs, innermost first (the second pair is pushed outside
# the first: S-tag 0x88a8 outside C-tag 0x8100 for QinQ).
#
# Why not `ip link add … type vlan`: the kernel these captures were made on is built without
# CONFIG_VLAN_8021Q (and without act_vlan), so there are no VLAN sub-interfaces. Instead a
# two-instruction-per-tag tc BPF program on va's egress calls the kernel's own
# bpf_skb_vlan_push() helper (helper #18, skb_vlan_push() in net/core/skbuff.c); with
# `ethtool -K va txvlan off` the kernel then writes the tags into the frame bytes
# (validate_xmit_vlan) before the capture tap sees them. The frame itself (ping's ICMP, the IP
# header, the MACs) is built by the kernel's normal stack. b has no VLAN support, so tagged
# frames get no answer: the neighbour entry for b is static and only a's egress is interesting.
# Everything happens in two namespaces this script creates and removes on exit. Needs
# llvm-mc (LLVM, for the BPF object) and ethtool besides tcpdump and iproute2.
set -euo pipefail
tags=${1:?TPID:TCI pairs, innermost first}
cmd=${2:?command to run in namespace a}
filter=${3:-}
a=wirecap-a-$$; b=wirecap-b-$$; obj=/tmp/wirecap-vlan-$$.o
trap 'ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -f $obj /tmp/$a.pcap' EXIT
# BPF assembly: for each tag, bpf_skb_vlan_push(skb, htons(tpid), tci); then return TC_ACT_OK.
{
  echo '.section classifier,"ax",@progbits'
  echo '.globl vlan_push'; echo '.type vlan_push,@function'
  echo 'vlan_push:'; echo 'r6 = r1'
  for t in $tags; do
    tpid=$((${t%%:*})); tci=$((${t##*:}))
    be=$(( ((tpid & 0xff) << 8) | (tpid >> 8) ))   # htons on the little-endian BPF target
    echo 'r1 = r6'; echo "r2 = $be"; echo "r3 = $tci"; echo 'call 18'
  done
  echo 'r0 = 0'; echo 'exit'
  echo '.size vlan_push, .-vlan_push'
  echo '.section license,"aw",@progbits'; echo '.globl _license'; echo '_license:'
  echo '.asciz "GPL"'
} | llvm-mc -triple bpfel -filetype=obj -o $obj
ip netns add $a; ip netns add $b
ip link add va netns $a type veth peer name vb netns $b
ip -n $a link set va address 02:00:00:00:00:0a; ip -n $b link set vb address 02:00:00:00:00:0b
ip -n $a addr add 10.99.0.1/24 dev va; ip -n $b addr add 10.99.0.2/24 dev vb
ip -n $a addr add fd00:99::1/64 dev va nodad; ip -n $b addr add fd00:99::2/64 dev vb nodad
for n in $a $b; do ip -n $n link set lo up; done
ip -n $a link set va up; ip -n $b link set vb up
ip -n $a neigh replace 10.99.0.2 lladdr 02:00:00:00:00:0b dev va nud permanent
ip netns exec $a ethtool -K va txvlan off tx-vlan-stag-hw-insert off >/dev/null
tc -n $a qdisc add dev va clsact
tc -n $a filter add dev va egress bpf da obj $obj sec classifier
ip netns exec $a tcpdump -i va -U -w /tmp/$a.pcap $filter 2>/dev/null &
tp=$!; sleep 1
ip netns exec $a sh -c "$cmd" || true
sleep 1; kill $tp; wait $tp 2>/dev/null || true
tcpdump -r /tmp/$a.pcap -nn -e -xx -v 2>/dev/null
