"""A throwaway project CA and site certificates, as FLARE's provisioning makes them (RSA, common name = site)."""

from __future__ import annotations

import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class ProjectCA:
    """``root_pem``; :meth:`issue` gives (key PEM, certificate PEM) for a name, signed by this CA or another."""

    def __init__(self, name: str = "project"):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.name = _name(name)
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.root_pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common: str, days: int = 30, key_size: int = 2048) -> tuple[bytes, bytes]:
        key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=2))
            .not_valid_after(now + datetime.timedelta(days=days))
            .sign(self.key, hashes.SHA256())
        )
        return _pem_key(key), cert.public_bytes(serialization.Encoding.PEM)
