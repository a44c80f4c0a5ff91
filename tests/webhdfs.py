"""A WebHDFS endpoint for the tests: no HDFS can run on this machine (no Hadoop distribution is
packaged for it), so this server speaks the WebHDFS REST protocol over real HTTP on loopback,
backed by a directory, for the operations the loader uses (CREATE with the datanode redirect,
OPEN, GETFILESTATUS, LISTSTATUS, RENAME, DELETE, MKDIRS) and HDFS's answers to them
(FileAlreadyExistsException, FileNotFoundException, rename onto an existing file fails)."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse


class WebHdfs:
    """A running emulator; ``url`` is its address, ``root`` the directory behind it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        handler = _handler(root)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(root: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _parse(self) -> tuple[Path, str, dict[str, str]]:
            url = urlparse(self.path)
            assert url.path.startswith("/webhdfs/v1")
            hdfs_path = url.path[len("/webhdfs/v1") :] or "/"
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            return root / hdfs_path.lstrip("/"), hdfs_path, query

        def _json(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, exception: str, message: str) -> None:
            self._json(code, {"RemoteException": {"exception": exception, "message": message}})

        def _status(self, path: Path, name: str) -> dict[str, object]:
            return {
                "pathSuffix": name,
                "type": "DIRECTORY" if path.is_dir() else "FILE",
                "length": 0 if path.is_dir() else path.stat().st_size,
            }

        def do_GET(self) -> None:
            path, hdfs_path, q = self._parse()
            op = q.get("op", "").upper()
            if not path.exists():
                self._error(404, "FileNotFoundException", f"File does not exist: {hdfs_path}")
            elif op == "OPEN":
                data = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif op == "GETFILESTATUS":
                self._json(200, {"FileStatus": self._status(path, "")})
            elif op == "LISTSTATUS":
                entries = [self._status(p, p.name) for p in sorted(path.iterdir())] if path.is_dir() else []
                self._json(200, {"FileStatuses": {"FileStatus": entries}})
            else:
                self._error(400, "IllegalArgumentException", f"unsupported GET op {op}")

        def do_PUT(self) -> None:
            path, hdfs_path, q = self._parse()
            op = q.get("op", "").upper()
            if op == "CREATE":
                if path.exists() and q.get("overwrite", "false").lower() != "true":
                    self._error(403, "FileAlreadyExistsException", f"{hdfs_path} already exists")
                    return
                if "datanode" not in q:  # the namenode step: send the client to a "datanode"
                    self.send_response(307)
                    self.send_header("Location", f"http://{self.headers['Host']}{self.path}&datanode=true")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = self._read_chunked()
                else:
                    data = self.rfile.read(length)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif op == "RENAME":
                dest = root / q["destination"].lstrip("/")
                ok = path.exists() and not dest.exists()
                if ok:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    path.rename(dest)
                self._json(200, {"boolean": ok})
            elif op == "MKDIRS":
                path.mkdir(parents=True, exist_ok=True)
                self._json(200, {"boolean": True})
            else:
                self._error(400, "IllegalArgumentException", f"unsupported PUT op {op}")

        def _read_chunked(self) -> bytes:
            out = bytearray()
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()

        def do_DELETE(self) -> None:
            path, _, _ = self._parse()
            if not path.exists():
                self._json(200, {"boolean": False})
                return
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
            self._json(200, {"boolean": True})

    return Handler
