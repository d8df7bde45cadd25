#!/bin/sh
# Regenerates the figures behind the README's bench table under the fair rules of issue 19:
# one TCP congestion control for every hop of every implementation (--cc), sing-box beside
# Xray, v2ray, trojan-gfw and shadowsocks-rust, 5 repeats taken in turns, clear wins marked.
# Run it on a quiet machine (no builds beside it): noise here is ±15 %, and a busy machine
# turns clear wins into "within noise". Needs root for --cc other than the host's default.
#
#   sudo crates/skiff-bench/scripts/readme-table.sh    # every run: 56 minutes here on
#                                                      # 2026-11-29 (2 cores), +2 for --rate
#   sudo CC=bbr OUT=/tmp/bench crates/skiff-bench/scripts/readme-table.sh
#
# Each run writes results.json / results.md / chart.svg into $OUT/<run>; the README tables are
# copied from the results.md files by hand (the -P 1 upload run is docs/bench's chart).
set -eu
cd "$(dirname "$0")/../../.."   # the repository root: cargo, docs/bench

CC=${CC:-reno}            # the issue's measurements used Reno for everyone
OUT=${OUT:-docs/bench}
SIZE=${SIZE:-1G}
REPEATS=${REPEATS:-5}
PEERS_DIR=${PEERS_DIR:-$(cd .. && pwd)/shared/peers/bin}
PEERS="v2ray,trojan,ss-libev,ss-rust,kcptun,xray=$PEERS_DIR/xray,sing-box=$PEERS_DIR/sing-box"
# The combinations the -P 10 columns cover (the README's table leaves the others blank).
PARALLEL_ROWS=tunnel,vless-tcp,vless-tls,vless-ws,ss-aes,ss-2022,trojan-tls,vmess-aes,vmess-ws-tls

cargo build --release -p skiff
SKIFF=./target/release/skiff
run() {
    name=$1
    shift
    echo "== $name: $SKIFF bench --cc $CC -r $REPEATS --peers $PEERS $*"
    "$SKIFF" bench --cc "$CC" -r "$REPEATS" --peers "$PEERS" --out "$OUT/$name" "$@" \
        || [ $? -eq 2 ]   # 2: some row failed; its reason is in the table, keep going
}
run upload-p1 -n "$SIZE"
run upload-p10 -n "$SIZE" -P 10 -f "$PARALLEL_ROWS"
run download-p1 -n "$SIZE" -d download
run download-p10 -n "$SIZE" -d download -P 10 -f "$PARALLEL_ROWS"
# The short-connection table: 2 000 connections per implementation in each turn.
run rate -n 64M -f vless-tls,vless-ws-tls,trojan-tls,vmess-aes,ss-2022 --rate 2000
# The KCP table: across the emulated lossy link, 20 s per run (a size would take too long).
run kcp-link -f tunnel,kcp,kcp-w2048,kcp-fast3,mkcp --link delay=100ms,loss=9% -d download -t 20s
echo "done: $OUT/{upload,download}-{p1,p10}/results.md, $OUT/rate and $OUT/kcp-link"
