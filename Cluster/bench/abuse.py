#!/usr/bin/env python3
"""Abuse bench: what hostile or broken peers do to one `oscar node`.

A benchmark-style check, not a test: it is run by hand (Cluster/bench/abuse.sh),
starts its own nodes on 127.0.0.1, and prints one line per figure on stdout in
the benchmark format

    oscar <metric> <value> <unit>

each followed on stderr by a short human line: the goal and whether it was met.
Goals come from issue 15; see docs/ABUSE-BENCH.md for what each figure means.

The client side is written from docs/PROTOCOL.md alone (framing §2, handshake
§3 version 2: hello -> challenge -> proof -> accept, messages §4), with a
minimal CBOR encoder/decoder. Python 3 standard library only.

Phases (each on a fresh node, each with a deadline, every loop bounded):
  preauth    250 unauthenticated connections announcing a 4 MiB frame
  nonreader  an authenticated peer that asks for 30 s and never reads
  idlefd     2,000 idle connections against a node under `ulimit -n 1024`
"""

import argparse
import atexit
import errno
import hashlib
import hmac
import http.client
import os
import random
import re
import resource
import secrets
import selectors
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HOST = "127.0.0.1"
PREAMBLE = b"OSCR\x00\x04"  # magic + protocol version 4 (PROTOCOL.md §1)

K_TELL, K_ASK, K_REPLY, K_FAILURE = 0x01, 0x02, 0x03, 0x04
K_HELLO, K_CHALLENGE, K_PROOF, K_ACCEPT, K_REJECT = 0x10, 0x11, 0x12, 0x13, 0x1F

MIB = 1024 * 1024


def now():
    return time.monotonic()


def note(text):
    print(text, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Minimal CBOR (RFC 8949): what the handshake and the echo actor need.


def _head(major, n):
    if n < 24:
        return bytes([major << 5 | n])
    if n < 1 << 8:
        return bytes([major << 5 | 24, n])
    if n < 1 << 16:
        return bytes([major << 5 | 25]) + struct.pack(">H", n)
    if n < 1 << 32:
        return bytes([major << 5 | 26]) + struct.pack(">I", n)
    return bytes([major << 5 | 27]) + struct.pack(">Q", n)


def cbor_encode(v):
    if v is None:
        return b"\xf6"
    if v is True:
        return b"\xf5"
    if v is False:
        return b"\xf4"
    if isinstance(v, int):
        return _head(0, v) if v >= 0 else _head(1, -1 - v)
    if isinstance(v, (bytes, bytearray)):
        return _head(2, len(v)) + bytes(v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        return _head(3, len(b)) + b
    if isinstance(v, (list, tuple)):
        return _head(4, len(v)) + b"".join(cbor_encode(x) for x in v)
    if isinstance(v, dict):
        return _head(5, len(v)) + b"".join(cbor_encode(k) + cbor_encode(x) for k, x in v.items())
    raise TypeError("cannot CBOR-encode %r" % type(v))


class CBORError(Exception):
    pass


def cbor_decode(data):
    value, end = _decode(memoryview(bytes(data)), 0, 0)
    if end != len(data):
        raise CBORError("%d trailing bytes" % (len(data) - end))
    return value


def _decode(b, p, depth):
    if depth > 64:
        raise CBORError("nested too deep")
    if p >= len(b):
        raise CBORError("truncated")
    ib = b[p]
    major, info = ib >> 5, ib & 0x1F
    p += 1
    if major == 7:
        if info == 20:
            return False, p
        if info == 21:
            return True, p
        if info in (22, 23):
            return None, p
        if info == 25:
            return struct.unpack(">e", b[p:p + 2])[0], p + 2
        if info == 26:
            return struct.unpack(">f", b[p:p + 4])[0], p + 4
        if info == 27:
            return struct.unpack(">d", b[p:p + 8])[0], p + 8
        raise CBORError("unsupported simple value %d" % info)
    if info < 24:
        n = info
    elif info in (24, 25, 26, 27):
        size = 1 << (info - 24)
        if p + size > len(b):
            raise CBORError("truncated head")
        n = int.from_bytes(b[p:p + size], "big")
        p += size
    elif info == 31 and major in (2, 3, 4, 5):
        return _decode_indefinite(b, p, major, depth)
    else:
        raise CBORError("bad additional info %d" % info)
    if major == 0:
        return n, p
    if major == 1:
        return -1 - n, p
    if major in (2, 3):
        if p + n > len(b):
            raise CBORError("string runs past the end")
        raw = bytes(b[p:p + n])
        return (raw if major == 2 else raw.decode("utf-8")), p + n
    if major == 4:
        out = []
        for _ in range(n):
            x, p = _decode(b, p, depth + 1)
            out.append(x)
        return out, p
    if major == 5:
        out = {}
        for _ in range(n):
            k, p = _decode(b, p, depth + 1)
            x, p = _decode(b, p, depth + 1)
            out[k] = x
        return out, p
    if major == 6:  # tag: keep the tagged item
        return _decode(b, p, depth + 1)
    raise CBORError("unreachable")


def _decode_indefinite(b, p, major, depth):
    items = []
    while True:
        if p >= len(b):
            raise CBORError("unterminated indefinite item")
        if b[p] == 0xFF:
            p += 1
            break
        x, p = _decode(b, p, depth + 1)
        items.append(x)
    if major == 2:
        return b"".join(items), p
    if major == 3:
        return "".join(items), p
    if major == 4:
        return items, p
    return dict(zip(items[0::2], items[1::2])), p


# --------------------------------------------------------------------------
# Framing and messages (PROTOCOL.md §2, §4).


def frame(body):
    return struct.pack(">I", len(body)) + body


def _str16(text):
    b = text.encode("utf-8")
    return struct.pack(">H", len(b)) + b


class AskEncoder:
    """Ask frames to one recipient with one payload; only the correlation
    differs, so the constant tail is built once."""

    def __init__(self, recipient, manifest, payload):
        self.tail = _str16(recipient) + _str16(manifest) + cbor_encode(payload)
        self.length = 2 + 8 + len(self.tail)

    def one(self, correlation):
        return struct.pack(">IBBQ", self.length, K_ASK, 0, correlation) + self.tail

    def many(self, first, count):
        pack, tail, length = struct.pack, self.tail, self.length
        return b"".join(pack(">IBBQ", length, K_ASK, 0, c) + tail for c in range(first, first + count))


def parse_outcome(body):
    """(kind, correlation, payload bytes) of a reply or failure frame."""
    kind, flags = body[0], body[1]
    if kind not in (K_REPLY, K_FAILURE):
        raise ValueError("unexpected frame kind 0x%02x" % kind)
    (corr,) = struct.unpack(">Q", body[2:10])
    p = 10
    if flags & 1:  # a sender path
        (n,) = struct.unpack(">H", body[p:p + 2])
        p += 2 + n
    return kind, corr, bytes(body[p:])


class HandshakeError(Exception):
    pass


class Client:
    """One authenticated connection to a node, as an initiator (PROTOCOL.md §3).

    Each client advertises 127.0.0.1 with a port of its own (by default its
    socket's local port) and a random uid, so two clients never share an
    identity (the node keys connections by the advertised address)."""

    def __init__(self, port, secret, timeout=5.0, advertise_port=None, uid=None):
        deadline = now() + timeout
        self.sock = socket.create_connection((HOST, port), timeout=max(0.1, deadline - now()))
        self.buf = bytearray()
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.advertise_port = advertise_port or self.sock.getsockname()[1]
            self.uid = uid or (random.getrandbits(64) | 1)
            nonce = os.urandom(32)
            node = {"host": HOST, "port": self.advertise_port, "uid": self.uid}
            hello = bytes([K_HELLO]) + cbor_encode({"node": node, "nonce": nonce})
            self.sock.sendall(PREAMBLE + frame(hello))
            pre = self.read_exact(6, deadline)
            if pre[:4] != b"OSCR":
                raise HandshakeError("bad preamble %r" % pre)
            if pre != PREAMBLE:
                raise HandshakeError("node speaks protocol version %d" % struct.unpack(">H", pre[4:])[0])
            challenge = self._handshake_frame(K_CHALLENGE, deadline)
            peer_uid = challenge["node"]["uid"]
            peer_nonce = challenge["nonce"]
            uids = struct.pack(">QQ", self.uid, peer_uid)
            key = secret.encode("utf-8")
            mac = hmac.new(key, b"oscar-initiator" + nonce + peer_nonce + uids, hashlib.sha256).digest()
            self.sock.sendall(frame(bytes([K_PROOF]) + cbor_encode({"mac": mac})))
            accept = self._handshake_frame(K_ACCEPT, deadline)
            expected = hmac.new(key, b"oscar-acceptor" + nonce + peer_nonce + uids, hashlib.sha256).digest()
            if not hmac.compare_digest(accept["mac"], expected):
                raise HandshakeError("the node's accept MAC is wrong")
            self.sock.settimeout(None)
        except BaseException:
            self.close()
            raise

    def _handshake_frame(self, kind, deadline):
        body = self.read_frame(deadline, limit=4096)
        if body[0] == K_REJECT:
            raise HandshakeError("rejected: %s" % cbor_decode(body[1:]).get("reason"))
        if body[0] != kind:
            raise HandshakeError("expected frame 0x%02x, got 0x%02x" % (kind, body[0]))
        return cbor_decode(body[1:])

    def read_exact(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - now()
            if left <= 0:
                raise socket.timeout("timed out")
            self.sock.settimeout(left)
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("the node closed the connection")
            self.buf += chunk
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read_frame(self, deadline, limit=8 * MIB):
        (length,) = struct.unpack(">I", self.read_exact(4, deadline))
        if length > limit or length == 0:
            raise ConnectionError("frame of %d bytes" % length)
        return self.read_exact(length, deadline)

    def take_frames(self):
        """Whole frames already buffered (after a non-blocking recv)."""
        out = []
        while len(self.buf) >= 4:
            (length,) = struct.unpack(">I", self.buf[:4])
            if len(self.buf) < 4 + length:
                break
            out.append(bytes(self.buf[4:4 + length]))
            del self.buf[:4 + length]
        return out

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


ECHO = ("/user/echo", "Echo")


def one_ask(port, secret, text, timeout):
    """A fresh connection, a handshake and one ask to /user/echo, all within
    `timeout`. Returns None when answered, else what went wrong."""
    deadline = now() + timeout
    try:
        c = Client(port, secret, timeout=timeout)
    except (OSError, HandshakeError, CBORError, KeyError, TypeError, ValueError, struct.error) as e:
        return "handshake: %s" % (e or type(e).__name__)
    try:
        c.sock.sendall(AskEncoder(*ECHO, {"text": text}).one(1))
        body = c.read_frame(deadline)
        kind, corr, payload = parse_outcome(body)
        if kind == K_REPLY and corr == 1:
            return None
        return "failure: %r" % (cbor_decode(payload),)
    except (OSError, CBORError, ValueError, struct.error) as e:
        return "ask: %s" % (e or type(e).__name__)
    finally:
        c.close()


# --------------------------------------------------------------------------
# The node under test.

STARTED = []  # every node process this script started (pid == its pgid)


def _die_with_parent():
    """In the child before exec: SIGKILL it if this script dies, even by
    SIGKILL, so no node outlives a run (PR_SET_PDEATHSIG survives exec)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, binary, secret, logdir, name, fd_limit=None, startup_timeout=60.0):
        self.port = free_port()
        self.http_port = free_port()
        while self.http_port == self.port:
            self.http_port = free_port()
        self.log_path = os.path.join(logdir, "%s.log" % name)
        args = [
            binary, "node", "--port", str(self.port), "--bind-host", HOST, "--advertised-host", HOST,
            "--http-port", str(self.http_port), "--http-host", HOST,
        ]
        env = dict(os.environ)
        env["OSCAR_SECRET"] = secret  # not on the command line (ps)
        env.pop("OSCAR_SECRET_FILE", None)
        if fd_limit is not None:
            # `ulimit -n` sets the soft and the hard limit: the node cannot raise it.
            args = ["bash", "-c", 'ulimit -n %d && exec "$0" "$@"' % fd_limit] + args
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True, preexec_fn=_die_with_parent)
        STARTED.append(self)
        self.pid = self.proc.pid
        deadline = now() + startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("the node exited with %s at start; its log:\n%s" % (self.proc.returncode, self.log_text()))
            if self.http_status("/health", timeout=1.0) == 200:
                break
            if now() > deadline:
                raise RuntimeError("the node did not answer /health within %.0f s; its log:\n%s" % (startup_timeout, self.log_text()))
            time.sleep(0.1)

    def alive(self):
        return self.proc.poll() is None

    def rss_mib(self):
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except (OSError, ValueError):
            pass
        return None

    def baseline(self, settle=1.0):
        """Median of RSS samples over `settle` seconds, once the node is up."""
        samples = []
        end = now() + settle
        while now() < end:
            r = self.rss_mib()
            if r is not None:
                samples.append(r)
            time.sleep(0.05)
        return statistics.median(samples) if samples else float("nan")

    def http(self, path, timeout=2.0):
        """(status, body) of GET path on the management port; (None, error) if none."""
        conn = http.client.HTTPConnection(HOST, self.http_port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Connection": "close"})
            r = conn.getresponse()
            return r.status, r.read(1 << 20).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as e:
            return None, str(e) or type(e).__name__
        finally:
            conn.close()

    def http_status(self, path, timeout=2.0):
        return self.http(path, timeout)[0]

    def metric(self, name):
        status, body = self.http("/metrics", timeout=3.0)
        if status != 200:
            return None
        total = None
        for m in re.finditer(r"^%s(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$" % re.escape(name), body, re.M):
            total = (total or 0) + float(m.group(1))
        return total

    def log_text(self, tail=40):
        try:
            self.log.flush()
            with open(self.log_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").splitlines()
            return "\n".join(lines[-tail:])
        except OSError:
            return ""

    def log_lines(self, pattern):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if re.search(pattern, line)]

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=10)
        if self in STARTED:
            STARTED.remove(self)
        self.log.close()


def stop_all():
    for node in list(STARTED):
        try:
            node.stop()
        except Exception:  # best effort at exit
            try:
                os.kill(node.pid, signal.SIGKILL)
            except OSError:
                pass


class RssSampler(threading.Thread):
    """Samples a node's RSS every `period` seconds until stopped."""

    def __init__(self, node, period=0.05):
        super().__init__(daemon=True)
        self.node, self.period = node, period
        self.samples = []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            r = self.node.rss_mib()
            if r is not None:
                self.samples.append((now(), r))
            self.halt.wait(self.period)

    def stop(self):
        self.halt.set()
        self.join(timeout=2)

    def timeline(self, start, step):
        """The peak RSS in each `step`-second window from `start`, as text."""
        windows = {}
        for t, r in self.samples:
            i = int((t - start) // step)
            windows[i] = max(windows.get(i, 0.0), r)
        return " ".join("%.0f" % windows[i] for i in sorted(windows) if i >= 0)

    @property
    def peak(self):
        return max((r for _, r in self.samples), default=float("nan"))


def report(metric, value, unit, goal_text, ok):
    shown = ("%.1f" % value) if isinstance(value, float) else str(value)
    print("oscar %s %s %s" % (metric, shown, unit), flush=True)
    verdict = "n/a" if ok is None else ("PASS" if ok else "FAIL")
    note("  %s: %s -- %s" % (metric, verdict, goal_text))


def check_alive(node, phase):
    if not node.alive():
        note("  !! the node of phase %s DIED (exit %s); last log lines:\n%s" % (phase, node.proc.returncode, node.log_text(20)))
        return False
    return True


def quiet_close(s):
    try:
        s.close()
    except OSError:
        pass


# --------------------------------------------------------------------------
# Phase 1: unauthenticated connections announcing a 4 MiB frame.


def phase_preauth(opts, secret, logdir):
    note("== preauth: %d unauthenticated connections, each preamble + a 4 MiB length prefix + %d KiB of body"
         % (opts.preauth_conns, opts.preauth_body // 1024))
    node = Node(opts.bin, secret, logdir, "preauth")
    try:
        base = node.baseline()
        note("  node pid %d, port %d; baseline RSS %.1f MiB" % (node.pid, node.port, base))
        payload = PREAMBLE + struct.pack(">I", 4 * MIB) + b"\xa5" * opts.preauth_body
        sel = selectors.DefaultSelector()
        state = {}  # socket -> [unsent memoryview or None, opened at, first bytes seen]
        closed_at = []
        connect_failed = 0
        preambles = set()  # what the node said first (a version mismatch would close for another reason)

        def closed_by_node(s):
            closed_at.append(now() - state[s][1])
            sel.unregister(s)
            del state[s]
            quiet_close(s)

        def pump(timeout):
            for key, events in sel.select(timeout):
                s = key.fileobj
                if s not in state:
                    continue
                if events & selectors.EVENT_READ:
                    try:
                        for _ in range(4):  # bounded: the node sends a 6-byte preamble, then closes
                            data = s.recv(65536)
                            if not data:
                                closed_by_node(s)
                                break
                            if not state[s][2]:  # the first bytes the node sent on it
                                state[s][2] = True
                                preambles.add(data[:6])
                    except BlockingIOError:
                        pass
                    except OSError:  # ECONNRESET: closed with our bytes unread
                        closed_by_node(s)
                    if s not in state:
                        continue
                if events & selectors.EVENT_WRITE and state[s][0] is not None:
                    send_some(s)

        def send_some(s):
            view = state[s][0]
            try:
                n = s.send(view)
            except BlockingIOError:
                n = 0
            except OSError:  # EPIPE / ECONNRESET: the node closed it
                closed_by_node(s)
                return
            view = view[n:]
            state[s][0] = view if len(view) else None
            sel.modify(s, selectors.EVENT_READ | (selectors.EVENT_WRITE if len(view) else 0))

        sampler = RssSampler(node)
        sampler.start()
        t0 = now()
        open_deadline = t0 + opts.phase_deadline
        for _ in range(opts.preauth_conns):
            if now() > open_deadline:
                note("  !! opening deadline reached")
                break
            try:
                s = socket.create_connection((HOST, node.port), timeout=2.0)
            except OSError:
                connect_failed += 1
                continue
            s.setblocking(False)
            state[s] = [memoryview(payload), now(), False]
            sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
            send_some(s)
            pump(0)
        opened = opts.preauth_conns - connect_failed
        t_opened = now()
        end = t_opened + opts.preauth_window
        while now() < end:
            pump(0.05)
        sampler.stop()
        peak = sampler.peak
        alive = check_alive(node, "preauth")
        if preambles - {PREAMBLE}:
            raise RuntimeError("the node sent preamble(s) %s, not %s: it does not speak protocol version 4, so it "
                               "closes these connections for another reason" % (
                                   ", ".join(p.hex(" ") for p in preambles), PREAMBLE.hex(" ")))
        still_open = len(state)
        unsent = sum(1 for v in state.values() if v[0] is not None)
        for s in list(state):
            sel.unregister(s)
            quiet_close(s)
        state.clear()
        sel.close()
        time.sleep(1.0)
        after = node.rss_mib()
        growth = peak - base
        span = (sampler.samples[-1][0] - sampler.samples[0][0]) if sampler.samples else 0.0
        note("  opened %d connections in %.2f s (%d failed to connect); %d RSS samples over %.1f s; peak RSS %.1f MiB, "
             "%.1f MiB 1 s after our side closed" % (opened, t_opened - t0, connect_failed, len(sampler.samples),
                                                    span, peak, after or float("nan")))
        if closed_at:
            note("  the node closed %d: median %.0f ms, max %.0f ms after connect; %d still open at the end "
                 "(%d of them had not taken all our bytes)"
                 % (len(closed_at), 1000 * statistics.median(closed_at), 1000 * max(closed_at), still_open, unsent))
        for line in node.log_lines(r"exceeds the maximum|refused")[:3]:
            note("  node log: " + line.strip())
        report("abuse_preauth_rss_growth", growth, "MiB", "goal <= 64 MiB (baseline %.1f, peak %.1f)" % (base, peak),
               alive and growth <= 64)
        report("abuse_preauth_closed", len(closed_at), "connections",
               "of %d opened; expected all (a frame over 4 KiB before the handshake closes the connection)" % opened,
               len(closed_at) == opts.preauth_conns)
    finally:
        node.stop()


# --------------------------------------------------------------------------
# Phase 2: an authenticated peer that asks as fast as it can and never reads.


def phase_nonreader(opts, secret, logdir):
    note("== nonreader: one authenticated peer asks /user/echo (text of %d bytes) for %.0f s and never reads"
         % (opts.text_bytes, opts.nonreader_seconds))
    node = Node(opts.bin, secret, logdir, "nonreader")
    try:
        base = node.baseline()
        note("  node pid %d, port %d; baseline RSS %.1f MiB" % (node.pid, node.port, base))
        enc = AskEncoder(*ECHO, {"text": "x" * opts.text_bytes})
        batch_count = 256
        sampler = RssSampler(node)
        sampler.start()
        t0 = now()
        deadline = t0 + opts.nonreader_seconds
        advertise = free_port()  # one identity across reconnects, as a stopped-then-resumed peer has
        uid = random.getrandbits(64) | 1
        client = None
        cutoffs = 0
        connects = 0
        connect_failures = []
        asks = 0
        blocked = 0.0  # seconds the socket took nothing
        corr = 1
        cut_times = []
        pending = None
        conn_started = t0
        while now() < deadline:
            if client is None:
                try:
                    client = Client(node.port, secret, timeout=min(5.0, max(0.1, deadline - now())),
                                    advertise_port=advertise, uid=uid)
                    client.sock.setblocking(False)
                    connects += 1
                    conn_started = now()
                    pending = None
                except (OSError, HandshakeError, CBORError, KeyError, TypeError, ValueError, struct.error) as e:
                    connect_failures.append(str(e) or type(e).__name__)
                    client = None
                    time.sleep(0.1)
                    continue
            if pending is None:
                pending = memoryview(enc.many(corr, batch_count))
                corr += batch_count
                asks += batch_count  # counted when queued in our process; all of it goes before the next batch
            try:
                n = client.sock.send(pending)
            except BlockingIOError:
                n = 0
            except OSError:  # EPIPE / ECONNRESET: the node cut us off
                cutoffs += 1
                cut_times.append(now() - conn_started)
                client.close()
                client = None
                asks -= batch_count  # this batch was not all sent
                continue
            pending = pending[n:] if n < len(pending) else None
            if n == 0:
                t_wait = now()
                sel_timeout = min(0.2, max(0.0, deadline - now()))
                with selectors.DefaultSelector() as sel:
                    sel.register(client.sock, selectors.EVENT_WRITE)
                    sel.select(sel_timeout)
                blocked += now() - t_wait
        if client is not None:
            client.close()
        if connects == 0:
            sampler.stop()
            raise RuntimeError("no handshake succeeded in %.0f s (%d attempts; first error: %s)"
                               % (opts.nonreader_seconds, len(connect_failures),
                                  connect_failures[0] if connect_failures else "none"))
        elapsed = now() - t0
        # Keep sampling a moment after the peer is gone: freeing can lag.
        time.sleep(1.0)
        sampler.stop()
        peak = sampler.peak
        alive = check_alive(node, "nonreader")
        after = node.rss_mib()
        cut_metric = node.metric("oscar_peers_cut_off_total") if alive else None
        growth = peak - base
        note("  %.1f s: %d asks sent (%.0f k/s) over %d connection(s); our sends blocked for %.1f s in all; "
             "%d reconnect failure(s)%s" % (elapsed, asks, asks / elapsed / 1000, connects, blocked,
                                            len(connect_failures),
                                            (" (first: %s)" % connect_failures[0]) if connect_failures else ""))
        note("  peak RSS (MiB) in each 5 s: %s" % sampler.timeline(t0, 5.0))
        if cut_times:
            note("  cut off after %s s on each connection" % ", ".join("%.1f" % t for t in cut_times[:10]))
        note("  peak RSS %.1f MiB; %.1f MiB 1 s after the peer left; node's oscar_peers_cut_off_total: %s"
             % (peak, after or float("nan"), "n/a" if cut_metric is None else "%d" % cut_metric))
        for line in node.log_lines(r"cut off|cutting|stopped reading|outbound")[:3]:
            note("  node log: " + line.strip())
        report("abuse_nonreader_rss_growth", growth, "MiB",
               "goal <= 128 MiB (baseline %.1f, peak %.1f)" % (base, peak), alive and growth <= 128)
        consistent = cut_metric is None or int(cut_metric) == cutoffs
        report("abuse_nonreader_cutoffs", cutoffs, "cutoffs",
               "times the node closed the non-reading peer (node counted %s%s); expected >= 1"
               % ("n/a" if cut_metric is None else "%d" % cut_metric, "" if consistent else ", which DIFFERS"),
               cutoffs >= 1)
    finally:
        node.stop()


# --------------------------------------------------------------------------
# Phase 3: idle connections against a node with 1,024 descriptors.


def phase_idlefd(opts, secret, logdir):
    note("== idlefd: node under ulimit -n %d; %d idle connections; %d asks over an authenticated client; "
         "%d fresh clients at +%.0f s; %d GET /health"
         % (opts.fd_limit, opts.idle_conns, opts.idle_asks, opts.fresh_clients, opts.fresh_after, opts.health_checks))
    node = Node(opts.bin, secret, logdir, "idlefd", fd_limit=opts.fd_limit)
    idle = []
    client = None
    try:
        try:
            with open("/proc/%d/limits" % node.pid) as f:
                lim = [line for line in f if line.startswith("Max open files")]
            note("  node pid %d, port %d; %s" % (node.pid, node.port, " ".join(lim[0].split()) if lim else "limits n/a"))
        except OSError:
            pass
        client = Client(node.port, secret, timeout=10.0)
        warm = AskEncoder(*ECHO, {"text": "warm-up"})
        client.sock.sendall(warm.one(1))
        parse_outcome(client.read_frame(now() + 10.0))
        note("  authenticated client up and answered a warm-up ask")

        # The flood: non-blocking connects, nothing sent.
        flood_start = now()
        open_errors = 0
        for _ in range(opts.idle_conns):
            if now() - flood_start > opts.phase_deadline:
                note("  !! flood deadline reached")
                break
            try:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            except OSError as e:
                note("  !! our own process ran out of descriptors at %d idle connections: %s" % (len(idle), e))
                break
            s.setblocking(False)
            rc = s.connect_ex((HOST, node.port))
            if rc not in (0, errno.EINPROGRESS, errno.EAGAIN):
                open_errors += 1
            idle.append(s)
        flood_opened = now()
        note("  %d idle connections opened in %.2f s (%d immediate errors)"
             % (len(idle), flood_opened - flood_start, open_errors))

        # /health during the flood, in a thread.
        health = {"ok": 0, "fail": []}

        def health_checks():
            for i in range(opts.health_checks):
                due = flood_opened + 0.1 + i * opts.health_period
                delay = due - now()
                if delay > 0:
                    time.sleep(delay)
                status, body = node.http("/health", timeout=2.0)
                if status == 200:
                    health["ok"] += 1
                else:
                    health["fail"].append("t+%.1f s: %s" % (now() - flood_start, status or body))

        ht = threading.Thread(target=health_checks, daemon=True)
        ht.start()

        # Fresh clients 6 s after the flood began (after the 5 s handshake timeout).
        fresh = {"ok": 0, "fail": []}
        fresh_lock = threading.Lock()

        def fresh_client(i):
            due = max(flood_start + opts.fresh_after, flood_opened) + i * 0.1
            delay = due - now()
            if delay > 0:
                time.sleep(delay)
            err = one_ask(node.port, secret, "fresh %d" % i, timeout=5.0)
            with fresh_lock:
                if err is None:
                    fresh["ok"] += 1
                else:
                    fresh["fail"].append("t+%.1f s: %s" % (now() - flood_start, err))

        fresh_threads = [threading.Thread(target=fresh_client, args=(i,), daemon=True) for i in range(opts.fresh_clients)]
        for t in fresh_threads:
            t.start()

        # 200 asks over the authenticated client, one every `ask_period`, each with a 5 s deadline.
        enc = AskEncoder(*ECHO, {"text": "during the flood"})
        sent_at = {}
        answered = 0
        failures = []
        latencies = []
        first = 2
        client.sock.setblocking(False)
        asks_start = now()
        next_i = 0
        last_deadline = asks_start + (opts.idle_asks - 1) * opts.ask_period + opts.ask_timeout
        hard_end = last_deadline + 1.0
        closed = None
        with selectors.DefaultSelector() as sel:
            sel.register(client.sock, selectors.EVENT_READ)
            while now() < hard_end and closed is None:
                t = now()
                while next_i < opts.idle_asks and t >= asks_start + next_i * opts.ask_period:
                    c = first + next_i
                    try:
                        client.sock.setblocking(True)
                        client.sock.settimeout(opts.ask_timeout)
                        client.sock.sendall(enc.one(c))
                    except OSError as e:
                        closed = "send: %s" % e
                        break
                    finally:
                        client.sock.setblocking(False)
                    sent_at[c] = now()
                    next_i += 1
                if closed is not None:
                    break
                if next_i >= opts.idle_asks and len(sent_at) == 0:
                    break  # every ask settled
                wait = (asks_start + next_i * opts.ask_period - now()) if next_i < opts.idle_asks else 0.05
                for _key, _ev in sel.select(max(0.0, min(0.05, wait))):
                    try:
                        data = client.sock.recv(1 << 16)
                    except BlockingIOError:
                        continue
                    except OSError as e:
                        closed = "recv: %s" % e
                        break
                    if not data:
                        closed = "the node closed the connection"
                        break
                    client.buf += data
                for body in client.take_frames():
                    kind, corr, payload = parse_outcome(body)
                    started = sent_at.pop(corr, None)
                    if started is None:
                        continue
                    if kind == K_REPLY and now() - started <= opts.ask_timeout:
                        answered += 1
                        latencies.append(now() - started)
                    elif kind == K_REPLY:
                        failures.append("late reply (%.1f s)" % (now() - started))
                    else:
                        failures.append("failure %r" % (cbor_decode(payload),))
                # Asks past their deadline are given up.
                for c, started in list(sent_at.items()):
                    if now() - started > opts.ask_timeout:
                        del sent_at[c]
                        failures.append("no reply within %.0f s" % opts.ask_timeout)
        if closed is not None:
            failures.append("connection lost: %s" % closed)
        unsent = opts.idle_asks - next_i
        for t in fresh_threads:
            t.join(timeout=max(0.0, flood_start + opts.fresh_after + 0.1 * opts.fresh_clients + 7.0 - now()))
        ht.join(timeout=max(0.0, flood_opened + opts.health_checks * (opts.health_period + 2.0) - now()))
        flood_end = now()

        # How the node treated the idle connections, seen from our side.
        idle_closed = 0
        idle_connected = 0
        for s in idle:
            try:
                s.getpeername()
                idle_connected += 1
            except OSError:
                pass
            try:
                if s.recv(64) == b"":
                    idle_closed += 1
                else:  # a preamble; closed after it?
                    if s.recv(64) == b"":
                        idle_closed += 1
            except BlockingIOError:
                pass
            except OSError:
                idle_closed += 1
        alive = check_alive(node, "idlefd")
        refused_metric = node.metric("oscar_connections_refused_total") if alive else None
        note("  flood lasted %.1f s; of %d idle connections %d reached the node's socket and %d had been closed by it "
             "by the end; node's oscar_connections_refused_total: %s"
             % (flood_end - flood_start, len(idle), idle_connected, idle_closed,
                "n/a" if refused_metric is None else "%d" % refused_metric))
        refusals = node.log_lines(r"refused .*connection")
        note("  node log has %d 'refused ... connection(s)' line(s)%s" % (len(refusals), (": " + refusals[0].strip()) if refusals else ""))
        for line in node.log_lines(r"too many open files|EMFILE|accept failed")[:3]:
            note("  node log: " + line.strip())
        if latencies:
            note("  asks: median %.1f ms, max %.0f ms" % (1000 * statistics.median(latencies), 1000 * max(latencies)))
        if failures or unsent:
            note("  asks not answered: %d (+%d never sent); first: %s" % (len(failures), unsent, "; ".join(failures[:3])))
        pct = 100.0 * answered / opts.idle_asks
        report("abuse_idle_fd_asks_answered", pct, "%",
               "%d of %d asks over the authenticated client answered within %.0f s; goal 100 %%"
               % (answered, opts.idle_asks, opts.ask_timeout), alive and answered == opts.idle_asks)
        if fresh["fail"]:
            note("  fresh clients failed: " + "; ".join(fresh["fail"][:3]))
        pct = 100.0 * fresh["ok"] / opts.fresh_clients
        report("abuse_idle_new_client_answered", pct, "%",
               "%d of %d new clients (handshake + one ask, 5 s each) from +%.0f s; goal 100 %%"
               % (fresh["ok"], opts.fresh_clients, opts.fresh_after), fresh["ok"] == opts.fresh_clients)
        if health["fail"]:
            note("  /health failed: " + "; ".join(health["fail"][:3]))
        pct = 100.0 * health["ok"] / opts.health_checks
        report("abuse_idle_health_ok", pct, "%",
               "%d of %d GET /health (2 s each) during the flood; goal 100 %%" % (health["ok"], opts.health_checks),
               health["ok"] == opts.health_checks)
    finally:
        if client is not None:
            client.close()
        for s in idle:
            quiet_close(s)
        node.stop()


# --------------------------------------------------------------------------


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard == resource.RLIM_INFINITY else min(hard, max(soft, want))
    if hard == resource.RLIM_INFINITY:
        target = max(soft, want)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("OSCAR_BIN", ".build/release/oscar"), help="the oscar binary")
    ap.add_argument("--phases", default="preauth,nonreader,idlefd", help="comma-separated subset to run")
    ap.add_argument("--logdir", default=None, help="where the nodes' logs go (default: a new temp dir)")
    ap.add_argument("--preauth-conns", type=int, default=250)
    ap.add_argument("--preauth-body", type=int, default=64 * 1024, help="body bytes each preauth connection sends")
    ap.add_argument("--preauth-window", type=float, default=3.0, help="seconds sampled after the last connection")
    ap.add_argument("--nonreader-seconds", type=float, default=30.0)
    ap.add_argument("--text-bytes", type=int, default=256, help="Echo text length in the non-reader's asks")
    ap.add_argument("--fd-limit", type=int, default=1024)
    ap.add_argument("--idle-conns", type=int, default=2000)
    ap.add_argument("--idle-asks", type=int, default=200)
    ap.add_argument("--ask-period", type=float, default=0.015, help="seconds between the idle phase's asks")
    ap.add_argument("--ask-timeout", type=float, default=5.0)
    ap.add_argument("--fresh-clients", type=int, default=20)
    ap.add_argument("--fresh-after", type=float, default=6.0, help="seconds after the flood began")
    ap.add_argument("--health-checks", type=int, default=20)
    ap.add_argument("--health-period", type=float, default=0.3)
    ap.add_argument("--phase-deadline", type=float, default=30.0, help="bound on opening connections in a phase")
    opts = ap.parse_args()

    if not (os.path.isfile(opts.bin) and os.access(opts.bin, os.X_OK)):
        sys.exit("abuse.py: no oscar binary at %s (give --bin or OSCAR_BIN)" % opts.bin)
    opts.bin = os.path.abspath(opts.bin)
    phases = [p.strip() for p in opts.phases.split(",") if p.strip()]
    unknown = set(phases) - {"preauth", "nonreader", "idlefd"}
    if unknown:
        sys.exit("abuse.py: unknown phase(s) %s" % ", ".join(sorted(unknown)))

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    atexit.register(stop_all)

    fds = raise_fd_limit(opts.idle_conns + 256)
    secret = secrets.token_hex(32)
    logdir = opts.logdir or tempfile.mkdtemp(prefix="oscar-abuse-")
    os.makedirs(logdir, exist_ok=True)
    load = os.getloadavg()
    note("abuse bench: %s; %d CPUs, load average %.1f %.1f %.1f; our RLIMIT_NOFILE %d; node logs in %s"
         % (opts.bin, os.cpu_count() or 0, load[0], load[1], load[2], fds, logdir))
    if fds < opts.idle_conns + 64 and "idlefd" in phases:
        note("  !! our descriptor limit (%d) is below %d: the idle flood will be smaller" % (fds, opts.idle_conns + 64))
    runners = {"preauth": phase_preauth, "nonreader": phase_nonreader, "idlefd": phase_idlefd}
    failed = []
    try:
        for p in phases:
            try:
                runners[p](opts, secret, logdir)
            except (RuntimeError, OSError, HandshakeError, CBORError, ValueError, KeyError, TypeError, struct.error) as e:
                failed.append(p)
                note("  !! phase %s could not run: %s" % (p, e))
    finally:
        stop_all()
    load = os.getloadavg()
    note("done; load average now %.1f %.1f %.1f" % load)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
