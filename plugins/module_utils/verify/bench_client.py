"""Stdlib-only streaming benchmark client for SGLang and OpenAI-compatible inference servers.

Self-contained (no imports from this repo): it is also copied to hosts and run with their system
Python, 3.8 or newer like every Ansible target
(`python3 bench_client.py --base-url http://127.0.0.1:30000 ...` prints JSON).

HTTP/1.1 is written by hand on an asyncio Protocol (one connection per request, `Connection:
close`), with chunked transfer decoding and Server-Sent-Events parsing done in the event loop's
read callback, so a streamed token costs no task wake-up. Endpoints:

- `completions`: OpenAI `/v1/completions`, `choices[0].text` per chunk.
- `chat`: OpenAI `/v1/chat/completions`, `choices[0].delta.content` (+ `reasoning_content`).
- `generate`: SGLang native `/generate`, cumulative `text` and `meta_info.completion_tokens`.

All ask for `stream: true`, `ignore_eos: true`, `temperature` (default 0) and a fixed output length;
the OpenAI ones add `stream_options: {"include_usage": true}`.

Fixed input length without a tokenizer: a prompt is a string of " x" words (random lowercase
letters, seeded, different per request so no prefix cache serves it). Every byte-level BPE and
SentencePiece vocabulary in use encodes " x" as one token, but the chat template, BOS and the
tokenizer may add more, so the prompt is calibrated against the server: two probe requests
(16 and 32 words, max 1 output token) give `prompt_tokens = overhead + per_word * words` from the
server's usage; the word count for `input_len` is solved from that and checked with one more probe
(adjusted up to 3 times). `prompt_tokens` of every measured request is reported, so a prompt that
did not hit `input_len` shows up. `input_len` is counted the server's way (template included).

Per request: TTFT (send -> first chunk with output), inter-chunk latencies (ITL), end-to-end latency,
output tokens from usage (`completion_tokens`) cross-checked against the streamed chunks with output
(a mismatch is counted and shown, not hidden: speculative decoding legitimately sends several tokens
per chunk). Per run: request/output/input throughput, single-stream decode speed
((output_tokens - 1) / (e2e - ttft) per request), TTFT/ITL/TPOT/e2e mean/p50/p90/p99, errors.
`run_benchmark` runs warm-up requests, then `repeats` runs and returns the median of each metric
over the runs (counts and errors summed), plus every run.

Timeouts: connect timeout, read timeout (no byte for that long) and a per-request deadline;
every error names the URL and what happened. Headers (API key) are never logged or returned.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import socket
import ssl
import string
import sys
import time
from statistics import median
from urllib.parse import urlsplit

__version__ = "1.1"

API_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "generate": "/generate"}
MAX_HEADER_BYTES = 64 * 1024
MAX_ERROR_BODY = 2000


class BenchError(Exception):
    """A request or benchmark failed; the message names the URL and what happened."""


# --------------------------------------------------------------------------------------------
# Parsers (pure, incremental)
# --------------------------------------------------------------------------------------------


class ChunkedDecoder:
    """Incremental decoder for HTTP/1.1 `Transfer-Encoding: chunked` bodies."""

    def __init__(self) -> None:
        self._rest = b""  # an incomplete size line or CRLF carried to the next feed
        self._need = -1  # -1: waiting for a size line; >= 0: bytes of chunk data still expected
        self._crlf = False  # waiting for the CRLF after chunk data
        self.done = False  # the zero-size chunk (and trailers) was read

    def feed(self, data: bytes) -> bytes:
        """Return the body bytes contained in `data` (possibly b"")."""
        if self.done:
            return b""
        if self._rest:
            data = self._rest + data
            self._rest = b""
        out = []
        pos, n = 0, len(data)
        while True:
            if self._need > 0:
                take = min(self._need, n - pos)
                out.append(data[pos:pos + take])
                pos += take
                self._need -= take
                if self._need:
                    break
                self._crlf = True
            if self._crlf:
                if n - pos < 2:
                    break
                if data[pos:pos + 2] != b"\r\n":
                    raise ValueError(f"malformed chunked body: expected CRLF after chunk, got {data[pos:pos + 2]!r}")
                pos += 2
                self._crlf = False
                self._need = -1
            if self._need == 0:  # last chunk: skip trailers up to the empty line
                end = data.find(b"\r\n", pos)
                if end < 0:
                    break
                if end == pos:
                    self.done = True
                    break
                pos = end + 2
                continue
            end = data.find(b"\r\n", pos)
            if end < 0:
                if n - pos > 1024:
                    raise ValueError("malformed chunked body: chunk size line longer than 1024 bytes")
                break
            line = data[pos:end]
            try:
                self._need = int(line.split(b";", 1)[0] if b";" in line else line, 16)
            except ValueError:
                raise ValueError(f"malformed chunked body: bad chunk size line {line[:80]!r}") from None
            pos = end + 2
            stop = pos + self._need
            if self._need and data.startswith(b"\r\n", stop):  # the whole chunk is here: the common case
                out.append(data[pos:stop])
                pos = stop + 2
                self._need = -1
        if pos < n and not self.done:
            self._rest = data[pos:]
        return b"".join(out)


class SSEParser:
    """Incremental Server-Sent-Events parser: feed bytes, get the `data` payload of complete events."""

    def __init__(self) -> None:
        self._rest = b""
        self._data: list[str] = []

    def feed(self, data: bytes) -> list[str]:
        """Return the data of each event completed by `data` (multi-line data joined with "\\n")."""
        if self._rest:
            data = self._rest + data
        if self._data or b"\r" in data:
            self._rest = b""
            return self._feed_lines(data)
        # Fast path for what servers send: "data: <one line>\n\n" per event.
        blocks = data.split(b"\n\n")
        rest = blocks.pop()
        events = []
        for block in blocks:
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append(block[6:].decode("utf-8", "replace"))
            else:
                events += self._feed_lines(block + b"\n\n")
        self._rest = rest
        return events

    def _feed_lines(self, data: bytes) -> list[str]:
        lines = data.split(b"\n")
        self._rest = lines.pop()
        events = []
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                if value.startswith(b" "):
                    value = value[1:]
                self._data.append(value.decode("utf-8", "replace"))
            # comments (": ping") and event:/id:/retry: fields are ignored
        return events

    def flush(self) -> list[str]:
        """At end of stream: return an event whose closing blank line never came."""
        rest, self._rest = self._rest, b""
        events = self._feed_lines(rest + b"\n") if rest else []
        if self._data:
            events.append("\n".join(self._data))
        self._data = []
        return events


_scan_json = json.JSONDecoder().scan_once


def parse_json(text: str):
    """json.loads for one SSE payload, with the C scanner called directly (the hot path)."""
    try:
        value, end = _scan_json(text, 0)
        if end == len(text):
            return value
    except StopIteration:
        pass
    return json.loads(text)  # leading/trailing whitespace, or the error message


def percentile(values: list[float], p: float) -> float | None:
    """Percentile with linear interpolation between closest ranks (numpy's default method)."""
    if not values:
        return None
    xs = sorted(values)
    k = (len(xs) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(values: list[float], scale: float = 1.0) -> dict:
    """mean/p50/p90/p99/min/max of `values` times `scale` (None when empty)."""
    if not values:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "min": None, "max": None, "n": 0}
    return {
        "mean": sum(values) / len(values) * scale,
        "p50": percentile(values, 50) * scale,
        "p90": percentile(values, 90) * scale,
        "p99": percentile(values, 99) * scale,
        "min": min(values) * scale,
        "max": max(values) * scale,
        "n": len(values),
    }


def _median_or_none(values: list[float | None]) -> float | None:
    """statistics.median of the non-None values (None if there are none)."""
    xs = [v for v in values if v is not None]
    return median(xs) if xs else None


# --------------------------------------------------------------------------------------------
# HTTP/1.1 on an asyncio Protocol
# --------------------------------------------------------------------------------------------


class _Target:
    """Parsed base URL."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BenchError(f"bad base_url {base_url!r}: expected http://host:port or https://host:port")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.base = f"{parts.scheme}://{parts.netloc}{self.prefix}"
        default_port = (self.scheme == "https" and self.port == 443) or (self.scheme == "http" and self.port == 80)
        self.host_header = self.host if default_port else f"{self.host}:{self.port}"
        if ":" in self.host and not default_port:
            self.host_header = f"[{self.host}]:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path


class _Timeouts:
    def __init__(self, total: float, connect: float | None = None, read: float | None = None) -> None:
        self.total = float(total)
        self.connect = float(connect) if connect else min(10.0, self.total)
        self.read = float(read) if read else self.total


class _Response(asyncio.Protocol):
    """The response side of one connection, parsed inside the event loop's read callback.

    Headers are collected until the blank line; body bytes (de-chunked) then go straight to a
    sink, so a streamed token costs no task wake-up. One watchdog timer per connection enforces
    the read timeout (no byte for `read` s) and the request deadline; it is re-armed lazily, not
    once per packet. Any failure is stored in `error` and wakes the waiting coroutine.
    """

    def __init__(self, conn: _Conn) -> None:
        self.conn = conn
        self.transport: asyncio.Transport | None = None
        self.head = bytearray()
        self.headers_read = False
        self.dec: ChunkedDecoder | None = None
        self.left = -1  # Content-Length bytes still expected; -1: no length (chunked or until close)
        self.sink = None  # callable(arrival time, body bytes) -> True to stop reading
        self.early: list[tuple[float, bytes]] = []  # body bytes that came with the headers
        self.finished = False
        self.error: BenchError | None = None
        self.waiter: asyncio.Future | None = None
        self.last_byte = time.perf_counter()
        self.watchdog: asyncio.TimerHandle | None = None

    # -- the coroutine side ------------------------------------------------------------------
    async def wait(self, what: str) -> None:
        """Until `what` ("headers" or "body") is complete; raises the stored BenchError."""
        while self.error is None and not (self.finished if what == "body" else self.headers_read):
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        if self.error is not None:
            raise self.error

    def _wake(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def fail(self, error: BenchError) -> None:
        if self.error is None and not self.finished:
            self.error = error
        self.stop()
        self._wake()

    def stop(self) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        if self.transport is not None:
            self.transport.close()

    def arm(self) -> None:
        """Start the watchdog: read timeout counted from the last byte, and the deadline."""
        self.last_byte = time.perf_counter()
        self._schedule(self.last_byte)

    def _schedule(self, now: float) -> None:
        due = min(self.last_byte + self.conn.t.read, self.conn.deadline)
        self.watchdog = asyncio.get_running_loop().call_later(due - now, self._check_time)

    def _check_time(self) -> None:
        c = self.conn
        now = time.perf_counter()
        if now >= c.deadline:
            self.fail(c.deadline_error())
        elif now - self.last_byte >= c.t.read:
            self.fail(BenchError(f"{c._where()}: read timeout after {c.t.read:g} s ({c.progress})"))
        else:
            self._schedule(now)

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = self.last_byte = time.perf_counter()
        if self.error is not None or self.finished:
            return
        try:
            if not self.headers_read:
                data = self._read_head(data)
                if not self.headers_read:
                    return
                self._wake()
            self._read_body(now, data)
        except BenchError as e:
            self.fail(e)
        except Exception as e:  # noqa: BLE001 - a sink's bug must not hang the request
            self.fail(BenchError(f"{self.conn.url}: {type(e).__name__}: {e}"))

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost tells how the body ended

    def connection_lost(self, exc: Exception | None) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        if self.error is not None or self.finished:
            return
        c = self.conn
        if exc is not None:
            stage = "before the response headers" if not self.headers_read else f"while {c.progress}"
            self.fail(BenchError(f"{c._where()}: connection error {stage}: {exc}"))
        elif not self.headers_read:
            self.fail(BenchError(f"{c._where()}: connection closed by the server before the response headers"))
        elif self.dec is not None:
            self.fail(BenchError(f"{c._where()}: connection closed by the server mid-stream "
                                 f"({c.progress}; chunked body not finished)"))
        elif self.left > 0:
            self.fail(BenchError(f"{c._where()}: connection closed by the server mid-body "
                                 f"({self.left} of {c.headers.get('content-length')} bytes missing)"))
        else:
            self._finish()

    # -- parsing -------------------------------------------------------------------------------
    def _read_head(self, data: bytes) -> bytes:
        start = max(0, len(self.head) - 3)
        self.head += data
        end = self.head.find(b"\r\n\r\n", start)
        if end < 0:
            if len(self.head) > MAX_HEADER_BYTES:
                raise BenchError(f"{self.conn._where()}: response headers longer than {MAX_HEADER_BYTES} bytes")
            return b""
        rest = bytes(self.head[end + 4:])
        self.conn.parse_head(self.head[:end].decode("latin-1"))
        self.head = bytearray()
        self.headers_read = True
        headers = self.conn.headers
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.dec = ChunkedDecoder()
        elif headers.get("content-length", "").isdigit():
            self.left = int(headers["content-length"])
        if self.left == 0:
            self._finish()
        return rest

    def _read_body(self, now: float, data: bytes) -> None:
        if self.dec is not None:
            try:
                data = self.dec.feed(data)
            except ValueError as e:
                raise BenchError(f"{self.conn._where()}: {e}") from None
        elif self.left > 0:
            data = data[:self.left]
            self.left -= len(data)
        if data:
            if self.sink is None:
                self.early.append((now, data))
            elif self.sink(now, data):
                self._finish()
                return
        if self.left == 0 or (self.dec is not None and self.dec.done):
            self._finish()

    def _finish(self) -> None:
        self.finished = True
        self.stop()
        self._wake()


class _Conn:
    """One HTTP request/response on its own connection, with connect/read/deadline timeouts."""

    def __init__(self, target: _Target, path: str, timeouts: _Timeouts, method: str = "POST") -> None:
        self.target = target
        self.path = path
        self.url = target.url(path)
        self.method = method
        self.t = timeouts
        self.deadline = time.perf_counter() + timeouts.total
        self.response: _Response | None = None
        self.status = 0
        self.headers: dict[str, str] = {}
        self.progress = "connecting"

    def _where(self) -> str:
        return f"{self.method} {self.url}"

    def deadline_error(self) -> BenchError:
        return BenchError(f"{self._where()}: request deadline of {self.t.total:g} s exceeded ({self.progress})")

    async def open(self, body: bytes | None, headers: dict[str, str] | None) -> None:
        """Connect, send the request and wait for the response headers."""
        t = self.target
        ctx = ssl.create_default_context() if t.scheme == "https" else None
        budget = min(self.t.connect, self.deadline - time.perf_counter())
        loop = asyncio.get_running_loop()
        try:
            connect = loop.create_connection(lambda: _Response(self), t.host, t.port, ssl=ctx)
            _, self.response = await asyncio.wait_for(connect, max(budget, 0.0))
        except asyncio.TimeoutError:  # an alias of the builtin TimeoutError only from Python 3.11 on
            if budget < self.t.connect:
                raise self.deadline_error() from None
            raise BenchError(f"{self._where()}: connect timeout after {self.t.connect:g} s ({self.progress})") from None
        except ConnectionRefusedError:
            raise BenchError(f"{self._where()}: cannot connect to {t.host}:{t.port}: connection refused "
                             "(is the server running?)") from None
        except (OSError, socket.gaierror) as e:
            raise BenchError(f"{self._where()}: cannot connect to {t.host}:{t.port}: {e.strerror or e}") from None
        transport = self.response.transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        lines = [f"{self.method} {t.prefix}{self.path} HTTP/1.1", f"Host: {t.host_header}",
                 "User-Agent: sglang-fleet-bench/" + __version__, "Accept: text/event-stream, application/json",
                 "Connection: close"]
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        for k, v in (headers or {}).items():
            lines.append(f"{k}: {v}")
        self.progress = "waiting for response headers"
        self.response.arm()
        transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        await self.response.wait("headers")
        self.progress = "reading the response body"

    def parse_head(self, head: str) -> None:
        status_line, *header_lines = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise BenchError(f"{self._where()}: not an HTTP response: {status_line[:100]!r}")
        self.status = int(parts[1])
        for line in header_lines:
            if ":" in line:
                k, v = line.split(":", 1)
                self.headers[k.strip().lower()] = v.strip()

    async def read_stream(self, sink) -> None:
        """Feed each piece of the body to `sink(arrival time, bytes)` as it arrives, until the
        body ends or `sink` returns True; raises BenchError on a cut or timeout."""
        r = self.response
        r.sink = sink
        early, r.early = r.early, []
        for now, data in early:
            if sink(now, data):
                r._finish()
                break
        await r.wait("body")

    async def read_body(self, limit: int | None = None) -> bytes:
        out = bytearray()

        def collect(_now: float, data: bytes) -> bool:
            out.extend(data)
            return limit is not None and len(out) >= limit

        await self.read_stream(collect)
        return bytes(out)

    def close(self) -> None:
        if self.response is not None:
            self.response.stop()


def _headers_with_key(headers: dict | None, api_key: str | None) -> dict:
    h = dict(headers or {})
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    return h


async def _http(method: str, base_url: str, path: str, body: bytes | None, headers: dict | None,
                timeout_s: float) -> tuple[int, bytes]:
    """One whole (not streamed) request on its own connection; return (status, body)."""
    conn = _Conn(_Target(base_url), path, _Timeouts(timeout_s), method=method)
    try:
        await conn.open(body, headers)
        return conn.status, await conn.read_body()
    finally:
        conn.close()


async def http_get(base_url: str, path: str, headers: dict | None = None, timeout_s: float = 10.0) -> tuple[int, bytes]:
    """GET base_url+path; return (status, body). Raises BenchError on connection problems."""
    return await _http("GET", base_url, path, None, headers, timeout_s)


async def http_post_json(base_url: str, path: str, payload: dict, headers: dict | None = None,
                         timeout_s: float = 10.0) -> tuple[int, bytes]:
    """POST `payload` as JSON to base_url+path; return (status, body). Raises BenchError on connection
    problems. A streamed request is stream_request's, which times each chunk as it arrives."""
    return await _http("POST", base_url, path, json.dumps(payload).encode(), headers, timeout_s)


def _error_text(body: bytes) -> str:
    """An error response's body as text for a message: its first MAX_ERROR_BODY bytes, "(empty body)" for none."""
    text = body[:MAX_ERROR_BODY].decode("utf-8", "replace").strip()
    return text or "(empty body)"


async def _error_body(conn: _Conn) -> str:
    try:
        body = await conn.read_body(limit=MAX_ERROR_BODY)
    except BenchError as e:
        return f"(body unreadable: {e})"
    return _error_text(body)


# --------------------------------------------------------------------------------------------
# One streamed generation request
# --------------------------------------------------------------------------------------------


def build_payload(api: str, model: str | None, prompt: str, output_len: int, temperature: float = 0.0,
                  ignore_eos: bool = True, extra: dict | None = None) -> dict:
    """The JSON body for one streamed request of `output_len` tokens."""
    if api == "generate":
        sp = {"max_new_tokens": output_len, "temperature": temperature}
        if ignore_eos:
            sp["ignore_eos"] = True
        body = {"text": prompt, "sampling_params": sp, "stream": True}
    else:
        body = {"max_tokens": output_len, "temperature": temperature, "stream": True,
                "stream_options": {"include_usage": True}}
        if model:
            body["model"] = model
        if ignore_eos:
            body["ignore_eos"] = True
        if api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
    if extra:
        body.update(extra)
    return body


def _event_output(api: str, ev: dict, state: dict) -> int:
    """Return the output characters this event adds; record usage/token counts in `state`."""
    if "error" in ev and not ev.get("choices") and "text" not in ev:
        err = ev["error"]
        msg = err.get("message", err) if isinstance(err, dict) else err
        raise BenchError(f"server error in stream: {msg}")
    if api == "generate":
        text = ev.get("text") or ""
        prev = state["gen_text_len"]
        if len(text) >= prev:
            added = len(text) - prev
            state["gen_text_len"] = len(text)
        else:  # incremental streaming output (--incremental-streaming-output)
            added = len(text)
            state["gen_text_len"] += added
        meta = ev.get("meta_info") or {}
        ct = meta.get("completion_tokens")
        if ct is not None:
            added_tokens = ct - state["gen_tokens"]
            state["gen_tokens"] = ct
            state["usage_completion"] = ct
            if added == 0 and added_tokens > 0:
                added = -1  # tokens that decode to no text yet still count as output
        if meta.get("prompt_tokens") is not None:
            state["usage_prompt"] = meta["prompt_tokens"]
        return added
    usage = ev.get("usage")
    if usage:
        if usage.get("completion_tokens") is not None:
            state["usage_completion"] = usage["completion_tokens"]
        if usage.get("prompt_tokens") is not None:
            state["usage_prompt"] = usage["prompt_tokens"]
    choices = ev.get("choices") or []
    if not choices:
        return 0
    c = choices[0]
    if api == "chat":
        d = c.get("delta") or {}
        return len(d.get("content") or "") + len(d.get("reasoning_content") or "")
    return len(c.get("text") or "")


class _StreamProgress:
    """`conn.progress` while streaming, formatted only when a message needs it (not once per chunk)."""

    def __init__(self, res: dict) -> None:
        self.res = res

    def __str__(self) -> str:
        return f"streaming, {self.res['chunks']} chunks with output received"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


async def stream_request(base_url: str, api: str, payload: dict, headers: dict | None = None,
                         timeout_s: float = 60.0, connect_timeout_s: float | None = None,
                         read_timeout_s: float | None = None) -> dict:
    """Send one streaming request and measure it. Never raises: errors go to result["error"].

    Returns {"ok", "error", "ttft", "e2e", "itl": [s...], "chunks" (events with output),
    "output_tokens" (usage, else chunks), "usage_tokens" (None if the server sent no usage),
    "prompt_tokens", "text_len", "done" ([DONE] seen)}; times in seconds.
    """
    path = API_PATHS[api]
    target = _Target(base_url)
    conn = _Conn(target, path, _Timeouts(timeout_s, connect_timeout_s, read_timeout_s))
    res = {"ok": False, "error": None, "ttft": None, "e2e": None, "itl": [], "chunks": 0, "output_tokens": 0,
           "usage_tokens": None, "prompt_tokens": None, "text_len": 0, "done": False}
    state = {"gen_text_len": 0, "gen_tokens": 0, "usage_completion": None, "usage_prompt": None}
    body = json.dumps(payload).encode()
    start = time.perf_counter()
    last = None
    try:
        await conn.open(body, headers)
        if conn.status != 200:
            raise BenchError(f"{conn._where()}: HTTP {conn.status}: {await _error_body(conn)}")
        sse = SSEParser()
        events = 0

        def on_body(now: float, data: bytes) -> bool:
            nonlocal events, last
            for raw in sse.feed(data):
                events += 1
                if raw.strip() == "[DONE]":
                    res["done"] = True
                    continue
                try:
                    ev = parse_json(raw)
                except ValueError:
                    raise BenchError(f"{conn.url}: event {events} is not JSON: {raw[:200]!r}") from None
                try:
                    added = _event_output(api, ev, state)
                except BenchError as e:
                    raise BenchError(f"{conn.url}: {e}") from None
                if added:
                    res["text_len"] += max(added, 0)
                    res["chunks"] += 1
                    if last is None:
                        res["ttft"] = now - start
                    else:
                        res["itl"].append(now - last)
                    last = now
            return res["done"]

        conn.progress = _StreamProgress(res)
        await conn.read_stream(on_body)
        for raw in sse.flush():
            if raw.strip() == "[DONE]":
                res["done"] = True
        if not res["done"]:
            raise BenchError(f"{conn.url}: stream ended without [DONE] after {res['chunks']} chunks with output "
                             "(connection closed by the server mid-stream)")
        res["ok"] = True
    except BenchError as e:
        res["error"] = str(e)
    except Exception as e:  # noqa: BLE001 - report, never crash a whole run
        res["error"] = f"{conn.url}: {type(e).__name__}: {e}"
    finally:
        conn.close()
    res["e2e"] = time.perf_counter() - start
    res["usage_tokens"] = state["usage_completion"]
    res["prompt_tokens"] = state["usage_prompt"]
    res["output_tokens"] = state["usage_completion"] if state["usage_completion"] is not None else res["chunks"]
    return res


# --------------------------------------------------------------------------------------------
# Prompts of a fixed token count
# --------------------------------------------------------------------------------------------


def make_prompt(words: int, rng: random.Random) -> str:
    """`words` words " x" of random lowercase letters (one token each in common vocabularies)."""
    letters = string.ascii_lowercase
    return "".join(" " + rng.choice(letters) for _ in range(words))


async def _probe_prompt_tokens(base_url, api, model, words, headers, timeouts) -> int:
    payload = build_payload(api, model, make_prompt(words, random.Random(words)), 1)
    r = await stream_request(base_url, api, payload, headers, timeouts.total, timeouts.connect, timeouts.read)
    if not r["ok"]:
        raise BenchError(f"prompt calibration request failed: {r['error']}")
    if r["prompt_tokens"] is None:
        raise BenchError(f"prompt calibration: {base_url}{API_PATHS[api]} reports no prompt_tokens in usage")
    return int(r["prompt_tokens"])


async def calibrate_prompt(base_url: str, api: str, model: str | None, input_len: int, headers: dict,
                           timeouts: _Timeouts) -> dict:
    """Find the word count whose prompt the server counts as `input_len` tokens (see module doc)."""
    k1, k2 = 16, 32
    n1 = await _probe_prompt_tokens(base_url, api, model, k1, headers, timeouts)
    n2 = await _probe_prompt_tokens(base_url, api, model, k2, headers, timeouts)
    per_word = (n2 - n1) / (k2 - k1)
    if per_word <= 0:
        raise BenchError(f"prompt calibration: prompt_tokens did not grow with the prompt ({n1} for {k1} words, "
                         f"{n2} for {k2})")
    overhead = n1 - per_word * k1
    words = max(1, round((input_len - overhead) / per_word))
    measured = None
    for _ in range(4):
        measured = await _probe_prompt_tokens(base_url, api, model, words, headers, timeouts)
        if measured == input_len:
            break
        step = round((input_len - measured) / per_word) or (1 if input_len > measured else -1)
        if words + step < 1:
            break
        words += step
    else:
        measured = await _probe_prompt_tokens(base_url, api, model, words, headers, timeouts)
    return {"words": words, "calibrated": True, "per_word_tokens": per_word, "overhead_tokens": overhead,
            "probe_prompt_tokens": measured, "exact": measured == input_len}


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


async def _run_requests(base_url, api, payloads, concurrency, headers, timeouts) -> tuple[list[dict], float]:
    queue = list(reversed(payloads))
    results: list[dict] = []

    async def worker():
        while queue:
            p = queue.pop()
            results.append(await stream_request(base_url, api, p, headers, timeouts.total, timeouts.connect,
                                                timeouts.read))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(payloads))))))
    return results, time.perf_counter() - t0


def summarize_run(results: list[dict], duration: float, output_len: int | None = None,
                  input_len: int | None = None) -> dict:
    """Metrics of one run (see module doc). Latencies in ms, rates per second."""
    ok = [r for r in results if r["ok"]]
    errors: dict[str, int] = {}
    for r in results:
        if not r["ok"]:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    out_tokens = sum(r["output_tokens"] for r in ok)
    in_tokens = sum(r["prompt_tokens"] or 0 for r in ok)
    decode = [(r["output_tokens"] - 1) / (r["e2e"] - r["ttft"]) for r in ok
              if r["ttft"] is not None and r["output_tokens"] > 1 and r["e2e"] > r["ttft"]]
    tpot = [(r["e2e"] - r["ttft"]) / (r["output_tokens"] - 1) for r in ok
            if r["ttft"] is not None and r["output_tokens"] > 1]
    with_usage = [r for r in ok if r["usage_tokens"] is not None]
    mismatched = [r for r in with_usage if r["usage_tokens"] != r["chunks"]]
    prompt_tokens = [r["prompt_tokens"] for r in ok if r["prompt_tokens"] is not None]
    outs = [r["output_tokens"] for r in ok]
    return {
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "errors": [{"error": k, "count": v} for k, v in sorted(errors.items(), key=lambda kv: -kv[1])][:10],
        "duration_s": duration,
        "request_throughput": len(ok) / duration if duration > 0 else None,
        "output_throughput": out_tokens / duration if duration > 0 else None,
        "input_throughput": in_tokens / duration if duration > 0 else None,
        "total_output_tokens": out_tokens,
        "total_input_tokens": in_tokens,
        "decode_tok_s_per_stream": summarize(decode),
        "ttft_ms": summarize([r["ttft"] for r in ok if r["ttft"] is not None], 1000.0),
        "itl_ms": summarize([x for r in ok for x in r["itl"]], 1000.0),
        "tpot_ms": summarize(tpot, 1000.0),
        "e2e_ms": summarize([r["e2e"] for r in ok], 1000.0),
        "output_tokens": {
            "expected": output_len, "min": min(outs) if outs else None, "max": max(outs) if outs else None,
            "requests_not_expected": sum(1 for o in outs if output_len is not None and o != output_len),
        },
        "prompt_tokens": {
            "expected": input_len, "min": min(prompt_tokens) if prompt_tokens else None,
            "max": max(prompt_tokens) if prompt_tokens else None,
            "requests_not_expected": sum(1 for p in prompt_tokens if input_len is not None and p != input_len),
        },
        "usage_check": {
            "requests_with_usage": len(with_usage),
            "requests_without_usage": len(ok) - len(with_usage),
            "usage_vs_chunks_mismatch": len(mismatched),
            "examples": [{"usage_tokens": r["usage_tokens"], "chunks": r["chunks"]} for r in mismatched[:5]],
        },
    }


def pooled_latency(results: list[dict]) -> dict:
    """TTFT, inter-token and end-to-end latency over every request of every repeat (ms): a percentile
    of one measurement as a whole (a repeat alone holds too few requests for a p90 or p99)."""
    return {"ttft": summarize([r["ttft"] for r in results if r["ttft"] is not None], 1000.0),
            "itl": summarize([x for r in results for x in r["itl"]], 1000.0),
            "e2e": summarize([r["e2e"] for r in results], 1000.0)}


def _median_of(runs: list[dict]) -> dict:
    """Median over runs of every metric; counts, token totals and errors summed."""
    out = dict(runs[0])
    for key in ("request_throughput", "output_throughput", "input_throughput", "duration_s"):
        out[key] = _median_or_none([r[key] for r in runs])
    for key in ("decode_tok_s_per_stream", "ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        out[key] = {s: (sum(r[key][s] for r in runs) if s == "n" else _median_or_none([r[key][s] for r in runs]))
                    for s in runs[0][key]}
    for key in ("completed", "failed", "total_output_tokens", "total_input_tokens"):
        out[key] = sum(r[key] for r in runs)
    errors: dict[str, int] = {}
    for r in runs:
        for e in r["errors"]:
            errors[e["error"]] = errors.get(e["error"], 0) + e["count"]
    out["errors"] = [{"error": k, "count": v} for k, v in sorted(errors.items(), key=lambda kv: -kv[1])][:10]
    for key, sub in (("output_tokens", "requests_not_expected"), ("prompt_tokens", "requests_not_expected")):
        vals = [r[key] for r in runs]
        mins = [v["min"] for v in vals if v["min"] is not None]
        maxs = [v["max"] for v in vals if v["max"] is not None]
        out[key] = {"expected": vals[0]["expected"], "min": min(mins) if mins else None,
                    "max": max(maxs) if maxs else None, sub: sum(v[sub] for v in vals)}
    uc = [r["usage_check"] for r in runs]
    out["usage_check"] = {
        "requests_with_usage": sum(u["requests_with_usage"] for u in uc),
        "requests_without_usage": sum(u["requests_without_usage"] for u in uc),
        "usage_vs_chunks_mismatch": sum(u["usage_vs_chunks_mismatch"] for u in uc),
        "examples": [e for u in uc for e in u["examples"]][:5],
    }
    return out


async def read_spec_accept_length(base_url: str, headers: dict | None = None, timeout_s: float = 10.0) -> dict:
    """Speculative decoding accept length: /server_info, /get_server_info, then /metrics.

    Returns {"value": float or None, "source": "<url> <field>" or None, "tried": [reasons]}.
    """
    tried = []
    for path in ("/server_info", "/get_server_info"):
        try:
            status, body = await http_get(base_url, path, headers, timeout_s)
        except BenchError as e:
            tried.append(str(e))
            continue
        if status != 200:
            tried.append(f"GET {base_url}{path}: HTTP {status}")
            continue
        try:
            info = json.loads(body)
            value = info["internal_states"][0]["avg_spec_accept_length"]
        except (ValueError, KeyError, IndexError, TypeError):
            tried.append(f"GET {base_url}{path}: no internal_states[0].avg_spec_accept_length")
            continue
        if value is not None:
            return {"value": float(value), "source": f"{path} internal_states[0].avg_spec_accept_length",
                    "tried": tried}
        tried.append(f"GET {base_url}{path}: avg_spec_accept_length is null")
    try:
        status, body = await http_get(base_url, "/metrics", headers, timeout_s)
        if status == 200:
            value = parse_prometheus_value(body.decode("utf-8", "replace"), "sglang:spec_accept_length")
            if value is not None:
                return {"value": value, "source": "/metrics sglang:spec_accept_length", "tried": tried}
            tried.append(f"GET {base_url}/metrics: no sglang:spec_accept_length")
        else:
            tried.append(f"GET {base_url}/metrics: HTTP {status}")
    except BenchError as e:
        tried.append(str(e))
    return {"value": None, "source": None, "tried": tried}


def parse_prometheus_value(text: str, name: str) -> float | None:
    """Value of the first sample of metric `name` (any labels) in Prometheus text format."""
    for line in text.splitlines():
        if line.startswith(name) and (len(line) == len(name) or line[len(name)] in " {"):
            try:
                return float(line.rsplit("}", 1)[-1].split()[0] if "}" in line else line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


async def _first_model(base_url: str, headers: dict, timeout_s: float) -> str | None:
    try:
        status, body = await http_get(base_url, "/v1/models", headers, timeout_s)
        if status == 200:
            data = json.loads(body).get("data") or []
            return data[0]["id"] if data else None
    except (BenchError, ValueError, KeyError, TypeError):
        pass
    return None


async def run_benchmark_async(base_url: str, api: str = "completions", model: str | None = None,
                              input_len: int = 128, output_len: int = 128, concurrency: int = 1,
                              num_prompts: int = 8, warmup: int = 1, repeats: int = 1, timeout_s: float = 60.0,
                              headers: dict | None = None, *, api_key: str | None = None,
                              connect_timeout_s: float | None = None, read_timeout_s: float | None = None,
                              temperature: float = 0.0, ignore_eos: bool = True, calibrate: bool = True,
                              seed: int = 0, spec_accept_length: bool = True, extra_body: dict | None = None) -> dict:
    """Async body of `run_benchmark`."""
    if api not in API_PATHS:
        raise BenchError(f"unknown api {api!r}; expected one of {sorted(API_PATHS)}")
    for name, value in (("input_len", input_len), ("output_len", output_len), ("concurrency", concurrency),
                        ("num_prompts", num_prompts), ("repeats", repeats)):
        if value < 1:
            raise BenchError(f"{name} must be >= 1, got {value}")
    _Target(base_url)
    hdrs = _headers_with_key(headers, api_key)
    timeouts = _Timeouts(timeout_s, connect_timeout_s, read_timeout_s)
    if api != "generate" and model is None:
        model = await _first_model(base_url, hdrs, timeouts.connect)
    if calibrate:
        prompt_info = await calibrate_prompt(base_url, api, model, input_len, hdrs, timeouts)
    else:
        prompt_info = {"words": input_len, "calibrated": False}
    rng = random.Random(seed)

    def payloads(n):
        return [build_payload(api, model, make_prompt(prompt_info["words"], rng), output_len, temperature,
                              ignore_eos, extra_body) for _ in range(n)]

    warm = {"requests": warmup, "failed": 0}
    if warmup > 0:
        wres, _ = await _run_requests(base_url, api, payloads(warmup), concurrency, hdrs, timeouts)
        failed = [r for r in wres if not r["ok"]]
        warm["failed"] = len(failed)
        if len(failed) == len(wres):
            raise BenchError(f"all {warmup} warm-up requests failed; first error: {failed[0]['error']}")
    runs, done = [], []
    for _ in range(repeats):
        res, duration = await _run_requests(base_url, api, payloads(num_prompts), concurrency, hdrs, timeouts)
        runs.append(summarize_run(res, duration, output_len, input_len))
        done += [r for r in res if r["ok"]]
    result = _median_of(runs)
    result["latency_ms"] = pooled_latency(done)
    result.update({
        "base_url": base_url, "api": api, "endpoint": API_PATHS[api], "model": model, "input_len": input_len,
        "output_len": output_len, "concurrency": concurrency, "num_prompts": num_prompts, "repeats": repeats,
        "warmup": warm, "prompt": prompt_info, "runs": runs,
        "client": {"name": "sglang-fleet bench_client", "version": __version__,
                   "python": sys.version.split()[0]},
    })
    if spec_accept_length:
        spec = await read_spec_accept_length(base_url, hdrs, timeouts.connect)
        result["spec_accept_length"] = spec["value"]
        result["spec_accept_length_source"] = spec["source"]
    return result


OUTPUT_CHECK_SEED = 20261206   # the output check's fixed prompts: the same on every host and release


async def greedy_outputs_async(base_url: str, api: str = "completions", model: str | None = None, prompts: int = 8,
                               output_len: int = 32, words: int = 32, headers: dict | None = None, *,
                               api_key: str | None = None, timeout_s: float = 60.0) -> list[str]:
    """The server's greedy (temperature 0) text for `prompts` fixed prompts of `words` words, one request
    at a time (a batch of one: no batching effects on the numbers), `output_len` tokens each, EOS ignored:
    what tune.yml compares between two configurations. Raises BenchError on any failed request."""
    hdrs = _headers_with_key(headers, api_key)
    timeouts = _Timeouts(timeout_s)
    if api != "generate" and model is None:
        model = await _first_model(base_url, hdrs, timeouts.connect)
    rng = random.Random(OUTPUT_CHECK_SEED)
    texts = []
    for _ in range(prompts):
        body = build_payload(api, model, make_prompt(words, rng), output_len, 0.0, True)
        body["stream"] = False
        body.pop("stream_options", None)
        status, raw = await http_post_json(base_url, API_PATHS[api], body, hdrs, timeout_s)
        if status != 200:
            raise BenchError(f"POST {_Target(base_url).url(API_PATHS[api])}: HTTP {status}: {_error_text(raw)}")
        try:
            doc = json.loads(raw)
            texts.append(doc["text"] if api == "generate" else
                         doc["choices"][0]["message"]["content"] if api == "chat" else doc["choices"][0]["text"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise BenchError(f"{base_url}{API_PATHS[api]}: no generated text in {raw[:200]!r}") from None
    return texts


def greedy_outputs(base_url: str, api: str = "completions", model: str | None = None, prompts: int = 8,
                   output_len: int = 32, **kwargs) -> list[str]:
    """greedy_outputs_async, run to completion (kwargs: words, headers, api_key, timeout_s)."""
    return asyncio.run(greedy_outputs_async(base_url, api, model, prompts, output_len, **kwargs))


def run_benchmark(base_url: str, api: str = "completions", model: str | None = None, input_len: int = 128,
                  output_len: int = 128, concurrency: int = 1, num_prompts: int = 8, warmup: int = 1,
                  repeats: int = 1, timeout_s: float = 60.0, headers: dict | None = None, **kwargs) -> dict:
    """Benchmark a server; return a JSON-able dict (medians over `repeats` runs after `warmup` requests).

    kwargs: api_key, connect_timeout_s, read_timeout_s, temperature, ignore_eos, calibrate, seed,
    spec_accept_length, extra_body. Raises BenchError when nothing can be measured (bad arguments,
    server unreachable during calibration, every warm-up request failed).
    """
    return asyncio.run(run_benchmark_async(base_url, api, model, input_len, output_len, concurrency, num_prompts,
                                           warmup, repeats, timeout_s, headers, **kwargs))


def main(argv: list[str] | None = None) -> int:
    """CLI: print the result of run_benchmark as JSON."""
    import argparse
    import os

    p = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    p.add_argument("--base-url", required=True)
    p.add_argument("--api", choices=sorted(API_PATHS), default="completions")
    p.add_argument("--model")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--num-prompts", type=int, default=8)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60.0)
    p.add_argument("--no-calibrate", action="store_true")
    p.add_argument("--api-key-env", help="name of an environment variable holding the API key")
    a = p.parse_args(argv)
    key = os.environ.get(a.api_key_env) if a.api_key_env else None
    try:
        res = run_benchmark(a.base_url, a.api, a.model, a.input_len, a.output_len, a.concurrency, a.num_prompts,
                            a.warmup, a.repeats, a.timeout, api_key=key, calibrate=not a.no_calibrate)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(res, indent=1))
    return 0 if res["failed"] == 0 else 2


if __name__ == "__main__":
    sys.exit(main())
