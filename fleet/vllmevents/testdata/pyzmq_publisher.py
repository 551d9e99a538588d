#!/usr/bin/python3
"""A vLLM-style KV event publisher on real libzmq (Debian python3-zmq and
python3-msgpack), for the interoperability test.

Usage: pyzmq_publisher.py SECONDS BATCHES SKIP
Binds a PUB (an XPUB, which also reports subscriptions) and a ROUTER socket
on loopback, prints their endpoints, waits for a line on stdin and for the
subscriber's subscription to reach the PUB socket, then publishes BATCHES batches with topic "kv" (each
storing one block chained on the previous one, hashes above 2**63). The
batches numbered in SKIP (comma separated) are kept for replay but not
sent. Replays are served as vLLM serves them until SECONDS have passed.
"""
import sys
import time

import msgpack
import zmq

seconds, n = float(sys.argv[1]), int(sys.argv[2])
skip = {int(x) for x in sys.argv[3].split(",") if x}
ctx = zmq.Context.instance()
pub = ctx.socket(zmq.XPUB)
pub.bind("tcp://127.0.0.1:*")
rep = ctx.socket(zmq.ROUTER)
rep.bind("tcp://127.0.0.1:*")
print(pub.getsockopt(zmq.LAST_ENDPOINT).decode(), rep.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
sys.stdin.readline()
if pub.poll(int(seconds * 1000)):
    pub.recv()  # the subscription: live batches sent from now on reach the subscriber

END = (-1).to_bytes(8, "big", signed=True)
buf = []


def serve(timeout_ms):
    while rep.poll(timeout_ms):
        frames = rep.recv_multipart()
        if len(frames) != 3:
            continue
        client, _, start = frames
        first = int.from_bytes(start, "big")
        for seq, payload in buf:
            if seq >= first:
                rep.send_multipart([client, b"", seq.to_bytes(8, "big"), payload])
        rep.send_multipart([client, b"", END, b""])
        timeout_ms = 0


deadline = time.time() + seconds
for i in range(n):
    parent = None if i == 0 else 2**63 + i - 1
    event = ["BlockStored", [2**63 + i], parent, list(range(4 * i, 4 * i + 4)), 4, None, "GPU"]
    payload = msgpack.packb([time.time(), [event], 0], use_bin_type=True)
    buf.append((i, payload))
    if i not in skip:
        pub.send_multipart([b"kv", i.to_bytes(8, "big"), payload])
    serve(10)
while time.time() < deadline:
    serve(50)
