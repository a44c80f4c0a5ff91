"""pymysql, the driver of every connection to a source, imported without ``cryptography``.

pymysql imports ``cryptography`` as it is imported, for one thing: encrypting the password with
the server's RSA key, which MySQL's ``sha256_password`` and ``caching_sha2_password`` ask for on a
connection without TLS (MariaDB never does). That import was a third of pymysql's and ~9 ms of
the start of every loader process. Here pymysql is imported with ``cryptography`` hidden, and its
RSA function imports it when first called. The loader's modules import pymysql from here.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import Any

_HIDDEN = "cryptography"


class _Hidden:
    """A finder that tells that ``cryptography`` is not there (only while pymysql is imported)."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> None:
        if name == _HIDDEN or name.startswith(_HIDDEN + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def _rsa_imported_when_needed(auth: Any) -> None:
    """pymysql's RSA encryption, importing what it needs on its first call."""
    encrypt = auth.sha2_rsa_encrypt

    def sha2_rsa_encrypt(password: bytes, salt: bytes, public_key: bytes) -> bytes:
        if not auth._have_cryptography:
            try:
                from cryptography.hazmat.backends import default_backend
                from cryptography.hazmat.primitives import hashes, serialization
                from cryptography.hazmat.primitives.asymmetric import padding
            except ImportError:
                pass  # pymysql's own error says that the exchange needs it
            else:
                auth.default_backend, auth.hashes = default_backend, hashes
                auth.serialization, auth.padding = serialization, padding
                auth._have_cryptography = True
        result: bytes = encrypt(password, salt, public_key)
        return result

    auth.sha2_rsa_encrypt = sha2_rsa_encrypt


# Not while another thread runs: it could be importing cryptography for itself meanwhile.
_hide = "pymysql" not in sys.modules and _HIDDEN not in sys.modules and threading.active_count() == 1
if _hide:
    sys.meta_path.insert(0, _Hidden)
try:
    import pymysql
    import pymysql._auth
    import pymysql.connections
    import pymysql.cursors
    import pymysql.err
finally:
    if _hide:
        sys.meta_path.remove(_Hidden)
if _hide:
    if hasattr(pymysql._auth, "_have_cryptography") and hasattr(pymysql._auth, "sha2_rsa_encrypt"):
        _rsa_imported_when_needed(pymysql._auth)
    else:  # a pymysql whose auth module is not the one this knows: imported again, as it is
        importlib.reload(pymysql._auth)

__all__ = ["pymysql"]
