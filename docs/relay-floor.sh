#!/bin/bash
# What this machine charges for relaying bytes, without Skiff: two chained relays on loopback,
# iperf3 -c -> R1 -> R2 -> iperf3 -s, and the CPU-seconds per GiB of each relay (utime+stime,
# children included, from /proc). KIND is `socat` (read/write, 256 KiB buffers: the floor of
# any relay that must see the bytes) or `haproxy` (splice both ways: the floor of one that
# need not). Needs iperf3 and socat or haproxy. Traffic stays on 127.0.0.1; it stops only the
# processes it started.
#
#   docs/relay-floor.sh socat 4G
#   docs/relay-floor.sh haproxy 4G
set -u
kind=${1:?usage: relay-floor.sh socat|haproxy [SIZE, e.g. 4G]}
size=${2:-4G}
dir=$(mktemp -d)
trap 'kill $R1 $R2 $SRV 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
cpu() { awk '{print $14+$15+$16+$17}' "/proc/$1/stat"; }
timeout 300 iperf3 -s -B 127.0.0.1 -p 15201 -1 >/dev/null 2>&1 & SRV=$!
case $kind in
socat)
  socat -b 262144 TCP-LISTEN:15301,bind=127.0.0.1,reuseaddr,fork TCP:127.0.0.1:15302 2>/dev/null & R1=$!
  socat -b 262144 TCP-LISTEN:15302,bind=127.0.0.1,reuseaddr,fork TCP:127.0.0.1:15201 2>/dev/null & R2=$!
  ;;
haproxy)
  for hop in "1 15301 15302" "2 15302 15201"; do
    set -- $hop
    printf 'global\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  option splice-request\n  option splice-response\nlisten r\n  bind 127.0.0.1:%s\n  server s 127.0.0.1:%s\n' "$2" "$3" > "$dir/h$1.cfg"
  done
  haproxy -f "$dir/h1.cfg" & R1=$!
  haproxy -f "$dir/h2.cfg" & R2=$!
  ;;
*) echo "unknown relay kind: $kind" >&2; exit 2 ;;
esac
sleep 1
a1=$(cpu $R1); a2=$(cpu $R2)
timeout 300 iperf3 -c 127.0.0.1 -p 15301 -n "$size" -f g | grep receiver
sleep 1
b1=$(cpu $R1); b2=$(cpu $R2)
python3 -c "
s='$size'; gib=float(s[:-1]) / (1 if s[-1]=='G' else 1024); hz=$(getconf CLK_TCK)
print('$kind: R1 %.3f  R2 %.3f CPU-s/GiB' % (($b1-$a1)/hz/gib, ($b2-$a2)/hz/gib))"
