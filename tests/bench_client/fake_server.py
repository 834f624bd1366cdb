"""A tiny stdlib HTTP server on 127.0.0.1 that misbehaves on purpose (for bench_client tests).

Modes: "ok" (streams `tokens` completion chunks, usage, [DONE]), "http500", "cut" (closes after
`cut_after` chunks), "stall" (reads the request, never answers), "stall_stream" (sends headers and
`cut_after` chunks, then goes silent), "bad_usage" (usage says one token more than it streamed),
"generate" (SGLang /generate format), "no_done" (ends the chunked body cleanly without [DONE]).
GET requests are answered from `routes` ({path: (status, body)}; /v1/models by default).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time


def sse(obj) -> bytes:
    """One SSE event as one HTTP chunk."""
    data = b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def completion_chunk(text: str) -> dict:
    return {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": None}]}


class FakeServer:
    """Run with `with FakeServer("cut") as s: s.url`."""

    def __init__(self, mode: str = "ok", tokens: int = 5, cut_after: int = 3, delay_s: float = 0.0,
                 routes: dict[str, tuple[int, bytes]] | None = None):
        self.mode, self.tokens, self.cut_after, self.delay_s = mode, tokens, cut_after, delay_s
        self.routes = {"/v1/models": (200, json.dumps({"data": [{"id": "fake"}]}).encode())}
        self.routes.update(routes or {})
        self.requests: list[bytes] = []
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self):
        self._thread.start()
        self._started.wait(5)
        return self

    def __exit__(self, *exc):
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)

    def _serve(self):
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())

    async def _main(self):
        self._stop = asyncio.Event()
        self._handlers: set[asyncio.Task] = set()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        await self._stop.wait()
        server.close()
        await asyncio.gather(*self._handlers, return_exceptions=True)  # stalled handlers end with _stop

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._handlers.add(asyncio.current_task())
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            body = await reader.readexactly(length)
            self.requests.append(head + body)
            await self._respond(head, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _respond(self, head: bytes, w: asyncio.StreamWriter):
        mode = self.mode
        if mode == "stall":
            await self._stop.wait()
            return
        if mode == "http500":
            body = b'{"error": {"message": "boom: out of KV cache", "code": 500}}'
            w.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                    b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            await w.drain()
            return
        if head.startswith(b"GET "):
            path = head.split(b" ")[1].decode()
            status, body = self.routes.get(path, (404, b"not found"))
            w.write(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
            await w.drain()
            return
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(self.tokens):
            if mode in ("cut", "stall_stream") and i == self.cut_after:
                if mode == "stall_stream":
                    await self._stop.wait()
                return
            if mode == "generate":
                w.write(sse({"text": "A" * (i + 1), "meta_info": {"prompt_tokens": 7, "completion_tokens": i + 1}}))
            else:
                w.write(sse(completion_chunk("A")))
            await w.drain()
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
        if mode not in ("generate",):
            extra = 1 if mode == "bad_usage" else 0
            w.write(sse({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": self.tokens + extra}}))
        if mode != "no_done":
            w.write(sse(b"[DONE]"))
        w.write(b"0\r\n\r\n")
        await w.drain()


class FullBacklog:
    """A 127.0.0.1 port whose listen queue is full: the kernel drops new SYNs, so connect() hangs.

    `with FullBacklog() as url:` (a server that is up but cannot take connections).
    """

    def __enter__(self) -> str:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(0)
        port = self._listener.getsockname()[1]
        self._fill = []
        for _ in range(3):  # never accepted: they fill the queue
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", port))
            except BlockingIOError:
                pass
            self._fill.append(s)
        time.sleep(0.2)
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc) -> None:
        for s in [*self._fill, self._listener]:
            s.close()
