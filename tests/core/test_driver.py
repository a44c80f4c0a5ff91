"""pymysql as the loader imports it: without ``cryptography`` until a password exchange needs RSA,
and that exchange then as pymysql does it."""

from __future__ import annotations

import subprocess
import sys

# In a fresh interpreter: the loader's steps import pymysql, not cryptography; then pymysql's RSA
# encryption of a password (MySQL's caching_sha2_password without TLS) with a server's public
# key, decrypted with its private key.
PROBE = """
import sys
import loader.extract, loader.app.steps
from loader.core.driver import pymysql
print(sorted(m for m in sys.modules if m.split(".")[0] == "cryptography"))
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
pem = key.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
)
salt = bytes(range(1, 21))
sent = pymysql._auth.sha2_rsa_encrypt(b"s3cret", salt, pem)
oaep = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
print(bytes(b ^ salt[i % 20] for i, b in enumerate(key.decrypt(sent, oaep))))
"""


def test_pymysql_comes_without_cryptography_which_a_password_exchange_by_rsa_then_imports() -> None:
    shown = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert shown.stdout.splitlines() == ["[]", "b's3cret\\x00'"]
