#!/usr/bin/env python3
"""Hand measurement (not a test): application-level UDP loss and CPU per GiB of a UDPspeeder
tunnel pair (speederv2 ↔ speederv2, or Skiff ↔ Skiff) over a user-space lossy link on
loopback: a relay between the speeder client and server adds a fixed one-way delay and drops
each datagram with a fixed probability, both directions. A generator sends numbered
datagrams at a fixed rate through the tunnel to an echo server and counts what comes back.

    python3 lossy_link.py speederv2 /path/to/speederv2
    python3 lossy_link.py skiff /path/to/skiff
    (--loss 9 --delay 50 --count 10000 --rate 1000 --size 1000 --fec 20:10 --mode 0)

Every process it starts it kills by PID; it only uses 127.0.0.1.
"""
import argparse, heapq, json, os, random, socket, subprocess, sys, tempfile, threading, time


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def big(sock):
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)


class Relay:
    """Client side at `port`; forwards to `server` and back, with loss and delay each way."""

    def __init__(self, server, loss, delay, rng):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        big(self.sock)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.01)
        self.port = self.sock.getsockname()[1]
        self.up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        big(self.up)
        self.up.bind(("127.0.0.1", 0))
        self.up.connect(server)
        self.up.settimeout(0.01)
        self.loss, self.delay, self.rng = loss, delay, rng
        self.client = None
        self.queue, self.lock, self.stop = [], threading.Lock(), False
        for f in (self.from_client, self.from_server, self.sender):
            threading.Thread(target=f, daemon=True).start()

    def push(self, sock, data, addr):
        if self.rng.random() < self.loss:
            return
        with self.lock:
            heapq.heappush(self.queue, (time.monotonic() + self.delay, id(data), sock, data, addr))

    def from_client(self):
        while not self.stop:
            try:
                data, addr = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            self.client = addr
            self.push(self.up, data, None)

    def from_server(self):
        while not self.stop:
            try:
                data = self.up.recv(65535)
            except (socket.timeout, ConnectionRefusedError):
                continue
            if self.client:
                self.push(self.sock, data, self.client)

    def sender(self):
        while not self.stop:
            now = time.monotonic()
            due = []
            with self.lock:
                while self.queue and self.queue[0][0] <= now:
                    due.append(heapq.heappop(self.queue))
            for _, _, sock, data, addr in due:
                try:
                    sock.send(data) if addr is None else sock.sendto(data, addr)
                except OSError:
                    pass
            time.sleep(0.0005)


ECHO_SEEN = set()


def echo(stop):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    big(s)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.05)

    def run():
        while not stop.is_set():
            try:
                d, a = s.recvfrom(65535)
                ECHO_SEEN.add(int.from_bytes(d[:4], "big"))
                s.sendto(d, a)
            except socket.timeout:
                pass

    threading.Thread(target=run, daemon=True).start()
    return s.getsockname()[1]


def start(impl, binary, role, listen, remote, args, tmp):
    log = open(os.path.join(tmp, f"{impl}-{role}.log"), "w")
    if impl == "speederv2":
        cmd = [binary, "-s" if role == "server" else "-c", "-l", f"127.0.0.1:{listen}", "-r",
               f"127.0.0.1:{remote}", "-f", args.fec, "--mode", str(args.mode), "--log-level", os.environ.get("SPEEDER_LOG", "2")]
    else:
        common = {"fec": args.fec, "mode": args.mode}
        if role == "server":
            config = {"log": {"loglevel": os.environ.get("SKIFF_LOG", "error")},
                      "inbounds": [{"listen": "127.0.0.1", "port": listen, "protocol": "udpspeeder",
                                    "settings": dict(common, target=f"127.0.0.1:{remote}")}],
                      "outbounds": [{"protocol": "freedom"}]}
        else:
            config = {"log": {"loglevel": os.environ.get("SKIFF_LOG", "error")},
                      "inbounds": [{"listen": "127.0.0.1", "port": listen, "protocol": "dokodemo-door",
                                    "settings": {"address": "127.0.0.1", "port": 9, "network": "udp"}}],
                      "outbounds": [{"protocol": "udpspeeder",
                                     "settings": dict(common, address="127.0.0.1", port=remote)}]}
        path = os.path.join(tmp, f"{role}.json")
        with open(path, "w") as f:
            json.dump(config, f)
        cmd = [binary, "run", "-c", path]
    return subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("impl", choices=["speederv2", "skiff"])
    ap.add_argument("binary")
    ap.add_argument("--loss", type=float, default=9.0)
    ap.add_argument("--delay", type=float, default=50.0, help="one-way ms (RTT = 2x)")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--fec", default="20:10")
    ap.add_argument("--mode", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--server", nargs=2, metavar=("IMPL", "BINARY"),
                    help="a different implementation for the server end (mixed pairs)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lossy-")
    stop = threading.Event()
    echo_port = echo(stop)
    server_port, client_port = free_port(), free_port()
    server_impl, server_binary = args.server or (args.impl, args.binary)
    procs = [start(server_impl, server_binary, "server", server_port, echo_port, args, tmp)]
    time.sleep(0.5)
    relay = Relay(("127.0.0.1", server_port), args.loss / 100, args.delay / 1000, random.Random(args.seed))
    procs.append(start(args.impl, args.binary, "client", client_port, relay.port, args, tmp))
    time.sleep(0.8)
    try:
        cpu0 = sum(cpu_seconds(p.pid) for p in procs)
        gen = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        big(gen)
        gen.connect(("127.0.0.1", client_port))
        gen.settimeout(0.05)
        seen, got = set(), [0]

        def collect():
            while not stop.is_set():
                try:
                    d = gen.recv(65535)
                except (socket.timeout, ConnectionRefusedError):
                    continue
                seen.add(int.from_bytes(d[:4], "big"))

        t = threading.Thread(target=collect, daemon=True)
        t.start()
        begin = time.monotonic()
        pad = bytes(args.size - 4)
        for seq in range(args.count):
            target = begin + seq / args.rate
            while time.monotonic() < target:
                time.sleep(0.0002)
            gen.send(seq.to_bytes(4, "big") + pad)
        time.sleep(2 * args.delay / 1000 + 1.5)
        cpu1 = sum(cpu_seconds(p.pid) for p in procs)
        stop.set()
        round_trip = 1 - len(seen) / args.count
        one_way = 1 - (1 - round_trip) ** 0.5
        payload_gib = 2 * args.count * args.size / 2**30
        print(f"{args.impl}: -f {args.fec} mode {args.mode}, link {args.delay} ms one way, "
              f"{args.loss} % loss each way, {args.count} datagrams of {args.size} B at {args.rate}/s")
        print(f"  echoed {len(seen)}/{args.count}: round-trip loss {round_trip*100:.3f} %, "
              f"per direction {one_way*100:.3f} %")
        lost = [q for q in range(args.count) if q not in seen]
        if lost:
            up = [q for q in lost if q not in ECHO_SEEN]
            print(f"  first lost: {lost[:16]}; {len(up)} of {len(lost)} lost on the way up")
        print(f"  CPU (both tunnel processes) {cpu1-cpu0:.2f} s for {payload_gib*1024:.1f} MiB of payload "
              f"= {(cpu1-cpu0)/payload_gib:.1f} s/GiB")
    finally:
        relay.stop = True
        for p in procs:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
