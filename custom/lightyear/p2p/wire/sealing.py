"""Models sealed end to end on the server route: the server hands them on but cannot read or forge them.

A site seals each model once (:meth:`Sealer.seal`): packed (:func:`pack`), encrypted with AES-256-GCM under a fresh
content key wrapped for each receiver with RSA-OAEP (SHA-256), and signed (RSA-PSS, SHA-256) over the job, sender,
round, encoding, training-set size, nonce and ciphertext digest (also the cipher's associated data). A receiver
(:meth:`Sealer.open`) takes one only if the sender's certificate was issued by the project's root CA itself to that
name and is valid, the signature holds, its key opens it and it unpacks (:func:`unpack`). No FLARE import.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping

import numpy as np
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.x509.oid import NameOID

VERSION = "lightyear-sealed/1"
MAGIC = b"LYPK1"
SEALED_ENTRY = "sealed"
"""The one key of a sealed model's weights: the ciphertext, as a uint8 array (so FLARE streams it like any array)."""
NONCE_BYTES = 12
MAX_HEADER_BYTES = 1 << 20
MAX_RSA_BYTES = 1024
"""Longest wrapped key or signature taken (RSA keys up to 8192 bits)."""
RSA_BITS = (2048, 8192)
"""The RSA key sizes a certificate may hold (FLARE provisions 2048 bits)."""
MAX_CERTIFICATE_BYTES = 64 * 1024
"""Longest certificate (chain, PEM) a site may declare or a message may carry."""
PACKED_DTYPES = frozenset(
    np.dtype(t).str for t in ("f2", "f4", "f8", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1")
)
"""The dtypes a packed model may hold (little-endian numbers and booleans: nothing that runs code on load)."""
MAX_DIMENSIONS = 32


# ---------------------------------------------------------------------- packing arrays
def pack(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The arrays as one byte string: magic, header length, JSON header [[key, dtype, shape], ...], raw bytes."""
    entries, parts = [], []
    for key, value in arrays.items():
        array = np.asarray(value)
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        array = array if array.flags.c_contiguous else array.copy(order="C")
        if array.dtype.str not in PACKED_DTYPES:
            raise ValueError(f"cannot seal entry {key!r} of dtype {array.dtype}: only numbers and booleans travel")
        entries.append([str(key), array.dtype.str, list(array.shape)])
        parts.append(memoryview(array).cast("B") if array.size else b"")
    header = json.dumps(entries, separators=(",", ":")).encode()
    return b"".join([MAGIC, len(header).to_bytes(8, "little"), header, *parts])


def unpack(data, max_entries: int, max_bytes: int) -> tuple[dict | None, str]:
    """(the arrays ``data`` holds, read-only views of it; "") or (None, why it is not a packed model), checked in full
    before any array is built."""
    view = memoryview(data).cast("B")
    start = len(MAGIC) + 8
    if len(view) < start or bytes(view[: len(MAGIC)]) != MAGIC:
        return None, "not a packed model"
    length = int.from_bytes(view[len(MAGIC) : start], "little")
    if length > MAX_HEADER_BYTES or start + length > len(view):
        return None, f"a header of {length} bytes in {len(view)}"
    try:
        entries = json.loads(bytes(view[start : start + length]))
    except (ValueError, RecursionError) as exc:
        return None, f"an unreadable header ({type(exc).__name__})"
    if not isinstance(entries, list) or len(entries) > max_entries:
        return None, f"a header that is not a list of at most {max_entries} entries"
    body, offset, layout = start + length, 0, []
    for entry in entries:
        problem = _entry_problem(entry)
        if problem:
            return None, problem
        key, dtype, shape = entry
        layout.append((key, np.dtype(dtype), shape, offset))
        offset += math.prod(shape) * np.dtype(dtype).itemsize
        if offset > max_bytes:
            return None, f"entries of more than {max_bytes} bytes"
    if len({key for key, *_ in layout}) != len(layout):
        return None, "a key named twice"
    if body + offset != len(view):
        return None, f"entries of {offset} bytes, {len(view) - body} bytes after the header"
    arrays = {}
    for key, dtype, shape, at in layout:
        count = math.prod(shape)
        arrays[key] = np.frombuffer(view, dtype=dtype, count=count, offset=body + at).reshape(tuple(shape))
    return arrays, ""


def _entry_problem(entry) -> str:
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and len(entry[0]) <= 1000):
        return "a header entry that is not [key, dtype, shape]"
    key, dtype, shape = entry
    if dtype not in PACKED_DTYPES:
        return f"entry {key[:80]!r} of dtype {str(dtype)[:20]!r}, not a number or boolean"
    if not isinstance(shape, list) or len(shape) > MAX_DIMENSIONS:
        return f"entry {key[:80]!r} without a shape"
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 40 for n in shape):
        return f"entry {key[:80]!r} with a shape that is not non-negative integers"
    return ""


# ---------------------------------------------------------------------- certificates
def certificate_problem(pem, name: str, root: x509.Certificate, now: datetime.datetime | None = None) -> str:
    """Why ``pem`` is not one valid RSA certificate the project's ``root`` CA itself issued to ``name``; "" when it
    is. No chain is taken (FLARE issues every certificate from the root), so one a site or the server issued fails."""
    if not isinstance(pem, (bytes, bytearray)) or not 0 < len(pem) <= MAX_CERTIFICATE_BYTES:
        return f"no certificate of at most {MAX_CERTIFICATE_BYTES} bytes"
    try:
        chain = x509.load_pem_x509_certificates(bytes(pem))
    except ValueError as exc:
        return f"an unreadable certificate ({exc})"
    if len(chain) != 1:
        return f"{len(chain)} certificates where the project's root CA issues one"
    now = now or datetime.datetime.now(datetime.timezone.utc)
    leaf = chain[0]
    names = [a.value for a in leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if names != [name]:
        return f"a certificate issued to {names[:2]!r}, not to {name!r}"
    for cert in (leaf, root):
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            return f"a certificate of {cert.subject.rfc4514_string()[:80]!r} outside its validity"
    try:
        leaf.verify_directly_issued_by(root)
    except (ValueError, TypeError, InvalidSignature):
        return f"a certificate of {name!r} the project's root CA did not issue"
    key = leaf.public_key()
    if not isinstance(key, rsa.RSAPublicKey):
        return "a certificate whose key is not RSA"
    exponent = key.public_numbers().e
    if not RSA_BITS[0] <= key.key_size <= RSA_BITS[1] or exponent < 65537 or exponent % 2 == 0:
        return f"an RSA key of {key.key_size} bits and exponent {exponent}, outside {RSA_BITS} bits and 65537 up"
    return ""


# ---------------------------------------------------------------------- sealing and opening
def context(job: str, sender: str, round_num, marker, num_samples) -> bytes:
    """What a seal binds a model to: the job, its sender, the round, the payload's encoding, the training-set size."""
    return json.dumps([VERSION, job, sender, round_num, marker, num_samples], separators=(",", ":")).encode()


def _signed(context_bytes: bytes, nonce: bytes, ciphertext) -> bytes:
    return context_bytes + nonce + hashlib.sha256(ciphertext).digest()


def sealed_weights_problem(weights) -> str:
    """Why ``weights`` is not a sealed model's one ciphertext entry (a byte array); "" when it is."""
    if not isinstance(weights, Mapping) or set(weights) != {SEALED_ENTRY}:
        return "not a sealed model (this run's models travel sealed end to end)"
    ciphertext = weights[SEALED_ENTRY]
    if not isinstance(ciphertext, np.ndarray) or ciphertext.dtype != np.uint8 or ciphertext.ndim != 1:
        return "a sealed model whose ciphertext is not a byte array"
    return ""


def seal_problem(seal, receivers) -> str:
    """Why ``seal`` is not a well-formed seal with a key wrapped for each of ``receivers``; "" when it is."""
    if not isinstance(seal, Mapping):
        return "no seal"
    nonce, signature, wrapped = seal.get("nonce"), seal.get("signature"), seal.get("wrapped")
    if not (isinstance(nonce, bytes) and len(nonce) == NONCE_BYTES):
        return f"a seal without a {NONCE_BYTES}-byte nonce"
    if not (isinstance(signature, bytes) and len(signature) <= MAX_RSA_BYTES):
        return "a seal without a signature"
    for receiver in receivers:
        key = wrapped.get(receiver) if isinstance(wrapped, Mapping) else None
        if key is None:
            return f"a seal with no key wrapped for {str(receiver)[:80]}"
        if not (isinstance(key, bytes) and len(key) <= MAX_RSA_BYTES):
            return f"a seal whose key for {str(receiver)[:80]} is not a short byte string"
    return ""


PSS = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)
OAEP = padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None)


class Sealer:
    """One site's sealing and opening of models; ``fetch(names) -> {name: pem}`` asks the server for certificates."""

    def __init__(
        self,
        site: str,
        job: str,
        key_pem: bytes,
        certificate_pem: bytes,
        root_pem: bytes,
        fetch: Callable[[list[str]], dict],
    ):
        self.site, self.job = site, str(job)
        self.root = x509.load_pem_x509_certificate(bytes(root_pem))
        self.key = serialization.load_pem_private_key(bytes(key_pem), password=None)
        if not isinstance(self.key, rsa.RSAPrivateKey):
            raise ValueError("this site's provisioned key is not an RSA key: sealed models need one")
        self.certificate = bytes(certificate_pem)
        own = certificate_problem(self.certificate, site, self.root)
        if own:
            raise ValueError(f"this site's own certificate cannot seal models: {own}")
        self.fetch = fetch
        self._keys: dict[str, tuple] = {}  # name -> (pem digest, its verified key, valid until)

    def verified_key(self, name: str, pem) -> tuple[rsa.RSAPublicKey | None, str]:
        """(the public key of ``name``'s certificate ``pem``, "") once it is verified, or (None, why not)."""
        digest = hashlib.sha256(bytes(pem)).hexdigest() if isinstance(pem, (bytes, bytearray)) else ""
        known = self._keys.get(name)
        now = datetime.datetime.now(datetime.timezone.utc)
        if known and known[0] == digest and now <= known[2]:
            return known[1], ""
        problem = certificate_problem(pem, name, self.root, now)
        if problem:
            return None, problem
        leaf = x509.load_pem_x509_certificate(bytes(pem))
        self._keys[name] = (digest, leaf.public_key(), min(leaf.not_valid_after_utc, self.root.not_valid_after_utc))
        return leaf.public_key(), ""

    def receiver_keys(self, names: list[str]) -> tuple[dict, dict]:
        """({receiver: its verified key}, {receiver: why none}), fetching the certificates not verified yet."""
        now = datetime.datetime.now(datetime.timezone.utc)
        known = {n: self._keys[n][1] for n in names if n in self._keys and now <= self._keys[n][2]}
        missing = [n for n in names if n not in known]
        fetched = self.fetch(missing) if missing else {}
        fetched = fetched if isinstance(fetched, Mapping) else {}
        problems = {}
        for name in missing:
            key, problem = self.verified_key(name, fetched.get(name))
            if key is None:
                problems[name] = problem or "no certificate"
            else:
                known[name] = key
        return {n: known[n] for n in names if n in known}, problems

    def seal(self, round_num: int, marker, num_samples, payload: Mapping, receiver_keys: Mapping) -> tuple[dict, dict]:
        """(the sealed weights {``SEALED_ENTRY``: ciphertext}, the seal {nonce, signature, wrapped}) of one model."""
        content_key = AESGCM.generate_key(bit_length=256)
        nonce = os.urandom(NONCE_BYTES)
        bound = context(self.job, self.site, round_num, marker, num_samples)
        ciphertext = AESGCM(content_key).encrypt(nonce, pack(payload), bound)
        signature = self.key.sign(_signed(bound, nonce, ciphertext), PSS, hashes.SHA256())
        wrapped = {}
        for name, key in receiver_keys.items():
            try:
                wrapped[name] = key.encrypt(content_key, OAEP)
            except (ValueError, TypeError):
                continue  # a key too small for OAEP (checked certificates have none): that receiver gets nothing
        weights = {SEALED_ENTRY: np.frombuffer(ciphertext, dtype=np.uint8)}
        return weights, {"nonce": nonce, "signature": signature, "wrapped": wrapped}

    def open(
        self, sender: str, round_num, marker, num_samples, weights, seal, sender_pem, max_entries: int, max_bytes: int
    ) -> tuple[dict | None, str, bool]:
        """(the payload, "", True), or (None, why refused, whether ``sender`` signed it: else it is not to blame)."""
        problem = sealed_weights_problem(weights) or seal_problem(seal, [self.site])
        if problem:
            return None, problem, False
        ciphertext = np.ascontiguousarray(weights[SEALED_ENTRY])
        nonce, signature, mine = seal["nonce"], seal["signature"], seal["wrapped"][self.site]
        key, problem = self.verified_key(sender, sender_pem)
        if key is None:
            return None, f"the sender's certificate: {problem}", False
        try:
            bound = context(self.job, sender, round_num, marker, num_samples)
        except (TypeError, ValueError):
            return None, "a sealed model whose round, encoding or training-set size is not plain data", False
        try:
            key.verify(signature, _signed(bound, nonce, ciphertext), PSS, hashes.SHA256())
        except InvalidSignature:
            return None, f"a seal {sender} did not sign for this job, round and payload", False
        try:  # from here on the sender signed what arrived: what fails is the sender's
            content_key = self.key.decrypt(mine, OAEP)
            plaintext = AESGCM(content_key).decrypt(nonce, ciphertext, bound)
        except Exception as exc:  # noqa: BLE001 - whatever fails to open is refused with its reason
            return None, f"a sealed model this site's key does not open ({type(exc).__name__})", True
        payload, problem = unpack(plaintext, max_entries, max_bytes)
        return payload, problem, True
