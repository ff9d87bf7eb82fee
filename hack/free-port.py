#!/usr/bin/env python3
"""Print COUNT free TCP ports on 127.0.0.1 (default 1), one per line, for a server started later.

A port taken from bind(port 0) comes from the kernel's ephemeral range, the same range every
outgoing connection's local port comes from: between the pick and the server's bind, any
connection on the machine (a control plane talking to its etcd, a test's client) may take it,
and the server fails with "address already in use". So the ports come from just below
net.ipv4.ip_local_port_range, which the kernel never hands to outgoing connections.

Two pickers running at once (a test plane and a benchmark plane, a test and its plane) must not
pick the same port: each pick is reserved for ten minutes with a file created exclusively under
${TMPDIR:-/tmp}/database-operator-ports, long enough for the server to bind it; after that the
bind check below sees it taken while the server runs.

Used by hack/control-plane.sh and the end-to-end tests (tests/e2e/common.rs).
"""
import os
import random
import socket
import sys
import time

RESERVATION_SECONDS = 600
SPAN = 10000


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def reserve(directory, port):
    path = os.path.join(directory, str(port))
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        return True
    except FileExistsError:
        try:
            if time.time() - os.stat(path).st_mtime >= RESERVATION_SECONDS:
                os.remove(path)  # stale: free for a later pick, not this one (no race to renew)
        except FileNotFoundError:
            pass
        return False


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    high = ephemeral_low()
    low = max(1024, high - SPAN)
    directory = os.path.join(os.environ.get("TMPDIR", "/tmp"), "database-operator-ports")
    os.makedirs(directory, exist_ok=True)
    ports = []
    for _ in range(20 * SPAN):
        if len(ports) == count:
            break
        port = random.randrange(low, high)
        if port not in ports and bindable(port) and reserve(directory, port):
            ports.append(port)
    if len(ports) < count:
        sys.exit(f"free-port: no free port found in {low}-{high - 1}")
    print("\n".join(map(str, ports)))


if __name__ == "__main__":
    main()
