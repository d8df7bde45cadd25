#!/bin/bash
# What geoip/geosite routing costs in memory: the RSS of an idle `run` with a config whose
# rules name five geosite codes (category-ads-all, cn, google, private, geolocation-!cn) and
# two geoip codes, minus the RSS of the same config without routing, for Skiff and for Xray
# on the same files, alternating, REPEATS times each. Every outbound is a freedom or a
# blackhole and nothing connects: only the loading is measured. Listens on 127.0.0.1 only;
# it stops only the processes it started.
#
#   docs/routing-memory.sh target/release/skiff ../shared/peers/bin/xray [REPEATS]
set -u
skiff=${1:?usage: routing-memory.sh SKIFF XRAY [REPEATS]}
xray=${2:?usage: routing-memory.sh SKIFF XRAY [REPEATS]}
repeats=${3:-3}
geo=$(cd "$(dirname "$0")/../../shared/data/geo" && pwd) || { echo "no ../shared/data/geo"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
outbounds='[{"tag":"direct","protocol":"freedom"},{"tag":"block","protocol":"blackhole"},{"tag":"proxy","protocol":"blackhole"}]'
cat > "$dir/plain.json" <<JSON
{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":18180,"protocol":"socks"}],
 "outbounds":$outbounds}
JSON
cat > "$dir/geo.json" <<JSON
{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":18181,"protocol":"socks"}],
 "outbounds":$outbounds,
 "routing":{"rules":[
   {"domain":["geosite:category-ads-all"],"outboundTag":"block"},
   {"ip":["geoip:private"],"outboundTag":"block"},
   {"domain":["geosite:private"],"outboundTag":"block"},
   {"domain":["geosite:google","geosite:geolocation-!cn"],"outboundTag":"proxy"},
   {"domain":["geosite:cn"],"outboundTag":"direct"},
   {"ip":["geoip:cn"],"outboundTag":"direct"}]}}
JSON
# VmRSS in KiB of BINARY running CONFIG, 3 s after start.
rss() {
  SKIFF_LOCATION_ASSET=$geo XRAY_LOCATION_ASSET=$geo "$1" run -c "$2" >/dev/null 2>&1 &
  local pid=$!
  sleep 3
  awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"
  kill "$pid"; wait "$pid" 2>/dev/null
}
printf '%-6s %10s %10s %10s\n' impl plain_KiB geo_KiB delta_KiB
for _ in $(seq "$repeats"); do
  for impl in skiff xray; do
    bin=${!impl}
    a=$(rss "$bin" "$dir/plain.json"); b=$(rss "$bin" "$dir/geo.json")
    printf '%-6s %10s %10s %10s\n' "$impl" "$a" "$b" "$((b - a))"
  done
done
