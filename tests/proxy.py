"""A TCP proxy in front of a test server that does to the connections what a network or an
attacker in the middle can: remove TLS from the server's greeting, or cut a connection once
its client has asked for something."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

# The capability flag a server's greeting offers TLS with (CLIENT_SSL, in its lower two bytes).
CLIENT_SSL = 0x0800


@dataclass
class Proxy:
    """Listens on ``port`` (loopback) and forwards to ``target``.

    ``strip_tls``: the server's greeting loses its TLS capability, as a proxy that downgrades
    connections does. ``cut_on``: once a client sends a packet holding these bytes, its connection
    is cut after ``cut_after`` more bytes from the server (``cuts`` counts them).
    """

    target: tuple[str, int]
    strip_tls: bool = False
    cut_on: bytes = b""
    cut_after: int = 0
    port: int = 0
    cuts: int = 0
    _listener: socket.socket = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def start(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def stop(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            asked = threading.Event()
            threading.Thread(target=self._up, args=(client, server, asked), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, asked), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, asked: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if self.cut_on and self.cut_on in data:
                    asked.set()
                server.sendall(data)
        _close(client, server)

    def _down(self, server: socket.socket, client: socket.socket, asked: threading.Event) -> None:
        first, sent_after = True, 0
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if first and self.strip_tls:
                    data = _without_tls(data)
                first = False
                if asked.is_set():
                    if sent_after + len(data) >= self.cut_after:
                        client.sendall(data[: max(0, self.cut_after - sent_after)])
                        with self._lock:
                            self.cuts += 1
                        break
                    sent_after += len(data)
                client.sendall(data)
        _close(client, server)


def _without_tls(greeting: bytes) -> bytes:
    """The server's greeting packet with CLIENT_SSL cleared: after the 4-byte header, the protocol
    version, the NUL-ended server version, the connection id (4), the first scramble (8) and a
    filler byte come the capability flags' lower two bytes."""
    at = greeting.index(b"\0", 5) + 1 + 4 + 8 + 1
    flags = int.from_bytes(greeting[at : at + 2], "little") & ~CLIENT_SSL
    return greeting[:at] + flags.to_bytes(2, "little") + greeting[at + 2 :]


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()


@contextlib.contextmanager
def proxy(target: tuple[str, int], **options: object) -> Iterator[Proxy]:
    """A started ``Proxy`` to ``target``, stopped on the way out."""
    running = Proxy(target, **options)  # type: ignore[arg-type]
    running.start()
    try:
        yield running
    finally:
        running.stop()
