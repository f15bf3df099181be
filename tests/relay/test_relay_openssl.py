#!/usr/bin/env python3
"""The relay's TLS records against OpenSSL's (Python's ssl module).

After mbedtls's handshake the relay hands its records to libcrypto
(tls/handoff.h); tests/tls/test_tls_handoff.c proves them against
mbedtls's record layer. This proves them against a third TLS 1.2 stack, as
a client a user might write: for each AEAD suite the relay offers, a full
handshake, IPC frames both ways (BindService and its reply), a frame larger
than one record, and a close_notify the relay takes as an orderly close.

usage: test_relay_openssl.py TRACEGATED TRACEGATE-RELAY TG-CERTS
"""
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile

STEP_S = 20
SUITES = [
    "ECDHE-ECDSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def wait_ready(proc, fd, what):
    """The line a daemon writes to --ready-fd once it listens."""
    with os.fdopen(fd, "r") as f:
        import select
        r, _, _ = select.select([f], [], [], STEP_S)
        line = f.readline() if r else ""
    if not line.startswith("ready"):
        fail("%s is not ready (exit %s)" % (what, proc.poll()))
    return line.split()


def start(argv, what):
    rfd, wfd = os.pipe()
    proc = subprocess.Popen(argv + ["--ready-fd", str(wfd)], pass_fds=(wfd,))
    os.close(wfd)
    return proc, wait_ready(proc, rfd, what)


def frame(body):
    return struct.pack("<I", len(body)) + body


def bind_request(request_id, service):
    name = service.encode()
    inner = b"\x0a" + bytes([len(name)]) + name        # service_name = 1
    return (b"\x10" + bytes([request_id]) +             # request_id = 2
            b"\x1a" + bytes([len(inner)]) + inner)      # msg_bind_service = 3


def read_frame(s):
    def exact(n):
        b = b""
        while len(b) < n:
            k = s.recv(n - len(b))
            if not k:
                fail("relay closed mid-frame")
            b += k
        return b
    (n,) = struct.unpack("<I", exact(4))
    return exact(n)


def main():
    tracegated, relay, certs = sys.argv[1:4]
    d = tempfile.mkdtemp(prefix="tg-test-openssl-")
    procs = []
    try:
        for args in (["ca", "pki"], ["host", "pki", "relay.test"],
                     ["client", "pki", "alice", "--role", "record"]):
            subprocess.run(["sh", certs] + args, cwd=d, check=True,
                           stdout=subprocess.DEVNULL)
        pki = os.path.join(d, "pki")
        csock = os.path.join(d, "consumer.sock")
        p, _ = start([tracegated, "--producer-socket", os.path.join(d, "p.sock"),
                      "--consumer-socket", csock, "--log-level", "warn"],
                     "tracegated")
        procs.append(p)
        p, ready = start([relay, "--listen", "127.0.0.1:0", "--consumer-socket",
                          csock, "--cert", os.path.join(pki, "relay.test.pem"),
                          "--key", os.path.join(pki, "relay.test.key"),
                          "--ca", os.path.join(pki, "ca.pem"),
                          "--authz", os.path.join(pki, "authz"),
                          "--log-level", "warn"], "tracegate-relay")
        procs.append(p)
        port = int(ready[1])

        for suite in SUITES:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(os.path.join(pki, "ca.pem"))
            ctx.load_cert_chain(os.path.join(pki, "alice.pem"),
                                os.path.join(pki, "alice.key"))
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
            ctx.set_ciphers(suite)
            raw = socket.create_connection(("127.0.0.1", port), timeout=STEP_S)
            s = ctx.wrap_socket(raw, server_hostname="relay.test")
            if s.cipher()[0] != suite:
                fail("negotiated %s, asked %s" % (s.cipher()[0], suite))
            # Three requests in one write: several frames in one record.
            s.sendall(b"".join(frame(bind_request(i, "ConsumerPort"))
                               for i in (1, 2, 3)))
            for i in (1, 2, 3):
                reply = read_frame(s)
                # request_id = i, then msg_bind_service_reply (field 4)
                if reply[:3] != b"\x10" + bytes([i]) + b"\x22":
                    fail("%s: reply %d is %s" % (suite, i, reply[:8].hex()))
            # A frame larger than a TLS record (2^14), split by OpenSSL
            # into several (an unknown field pads it): the relay replies
            # only once it has read the whole frame.
            big = bind_request(4, "x" * 100)
            big += b"\xa2\x38\x80\x80\x02" + b"\x00" * 32768  # field 900, 32 KiB
            s.sendall(frame(big))
            reply = read_frame(s)
            if reply[:2] != b"\x10\x04":
                fail("%s: no reply to the large frame: %s" % (suite, reply[:8].hex()))
            s.unwrap()  # close_notify, and the relay's in return
            s.close()
            print("ok", suite)
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGINT)
            try:
                p.wait(STEP_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)
    for p in procs:
        if p.returncode not in (0, -signal.SIGINT):
            fail("a daemon exited with %s" % p.returncode)


if __name__ == "__main__":
    main()
