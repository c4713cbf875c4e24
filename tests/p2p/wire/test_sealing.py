"""Sealed models on the server route: only the receivers read them, only the sender could have made them."""

import datetime
import json

import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from lightyear.p2p.wire import sealing
from lightyear.p2p.wire.sealing import MAGIC, SEALED_ENTRY, Sealer, certificate_problem, pack, unpack
from project_ca import ProjectCA

JOB = "job-1"
MODEL = {
    "w": np.arange(12, dtype=np.float32).reshape(3, 4),
    "h": np.array([1.5, -2.0], dtype=np.float16),
    "count": np.array(7, dtype=np.int64),
    "empty": np.zeros((0, 3), dtype=np.float32),
}


@pytest.fixture(scope="module")
def project():
    ca = ProjectCA()
    creds = {name: ca.issue(name) for name in ("site-1", "site-2", "site-3")}
    return ca, creds


def sealer(project, name, fetch=None):
    ca, creds = project
    key, cert = creds[name]
    return Sealer(name, JOB, key, cert, ca.root_pem, fetch or (lambda names: {n: creds[n][1] for n in names}))


def sealed(project, receivers=("site-2", "site-3"), round_num=3, marker="float32", num_samples=40):
    sender = sealer(project, "site-1")
    keys, problems = sender.receiver_keys(list(receivers))
    assert problems == {}
    weights, seal = sender.seal(round_num, marker, num_samples, MODEL, keys)
    return {"round": round_num, "marker": marker, "num_samples": num_samples, "weights": weights, "seal": seal}


def open_as(project, receiver, message, sender="site-1", sender_pem=None):
    _, creds = project
    pem = creds[sender][1] if sender_pem is None else sender_pem
    return sealer(project, receiver).open(
        sender,
        message["round"],
        message["marker"],
        message["num_samples"],
        message["weights"],
        message["seal"],
        pem,
        max_entries=10,
        max_bytes=1 << 20,
    )


def test_each_receiver_opens_the_one_ciphertext_into_the_sent_arrays(project):
    message = sealed(project)
    assert list(message["weights"]) == [SEALED_ENTRY] and set(message["seal"]["wrapped"]) == {"site-2", "site-3"}
    assert MODEL["w"].tobytes() not in message["weights"][SEALED_ENTRY].tobytes()  # the server sees no weight
    for receiver in ("site-2", "site-3"):
        payload, problem, signed = open_as(project, receiver, message)
        assert problem == "" and signed and list(payload) == list(MODEL)
        for key, value in MODEL.items():
            assert payload[key].dtype == value.dtype and payload[key].shape == value.shape
            np.testing.assert_array_equal(payload[key], value)


def test_a_site_it_was_not_sealed_for_cannot_open_it(project):
    payload, problem, _ = open_as(project, "site-3", sealed(project, receivers=("site-2",)))
    assert payload is None and "no key wrapped for site-3" in problem


@pytest.mark.parametrize("field, value", [("round", 4), ("marker", "float16"), ("num_samples", 4000)])
def test_the_relay_cannot_move_a_model_to_another_round_or_change_what_it_claims(project, field, value):
    message = sealed(project)
    message[field] = value
    payload, problem, signed = open_as(project, "site-2", message)
    assert payload is None and "did not sign for this job, round and payload" in problem and not signed


def test_another_job_cannot_replay_it(project):
    message = sealed(project)
    ca, creds = project
    other = Sealer("site-2", "job-2", *creds["site-2"], ca.root_pem, lambda names: {})
    payload, problem, _ = other.open(
        "site-1", 3, "float32", 40, message["weights"], message["seal"], creds["site-1"][1], 10, 1 << 20
    )
    assert payload is None and "did not sign" in problem


def test_an_altered_ciphertext_is_refused(project):
    message = sealed(project)
    data = message["weights"][SEALED_ENTRY].copy()
    data[-1] ^= 1
    message["weights"] = {SEALED_ENTRY: data}
    assert "did not sign" in open_as(project, "site-2", message)[1]


def test_a_relay_posing_as_another_sender_is_refused(project):
    message = sealed(project)  # site-1's model, named as site-3's with site-3's real certificate
    payload, problem, _ = open_as(project, "site-2", message, sender="site-3")
    assert payload is None and "site-3 did not sign" in problem


def test_a_relay_that_seals_its_own_model_for_a_receiver_is_refused(project):
    ca, creds = project
    forger = ProjectCA("forger")  # a CA the project never trusted, issuing a certificate named site-1
    key, cert = forger.issue("site-1")
    fake = Sealer("site-1", JOB, key, cert, forger.root_pem, lambda names: {n: creds[n][1] for n in names})
    keys = {"site-2": x509.load_pem_x509_certificate(creds["site-2"][1]).public_key()}
    weights, seal = fake.seal(3, "float32", 40, MODEL, keys)
    message = {"round": 3, "marker": "float32", "num_samples": 40, "weights": weights, "seal": seal}
    payload, problem, _ = open_as(project, "site-2", message, sender_pem=cert)
    assert payload is None and "the project's root CA did not issue" in problem


def test_certificates_are_checked_for_name_issuer_and_validity(project):
    ca, creds = project
    assert certificate_problem(creds["site-2"][1], "site-2", ca.cert) == ""
    assert "issued to ['site-2'], not to 'site-3'" in certificate_problem(creds["site-2"][1], "site-3", ca.cert)
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=365)
    assert "outside its validity" in certificate_problem(creds["site-2"][1], "site-2", ca.cert, now=later)
    assert "unreadable" in certificate_problem(
        b"-----BEGIN CERTIFICATE-----\nxx\n-----END CERTIFICATE-----\n", "a", ca.cert
    )
    assert "at most" in certificate_problem(b"x" * (sealing.MAX_CERTIFICATE_BYTES + 1), "a", ca.cert)
    assert "no certificate" in certificate_problem(None, "a", ca.cert)


def test_a_receiver_without_a_valid_certificate_gets_no_key_and_the_rest_are_fetched_once(project):
    ca, creds = project
    asked = []

    def fetch(names):
        asked.append(list(names))
        return {"site-2": creds["site-2"][1], "site-3": creds["site-2"][1]}  # site-3's slot holds site-2's certificate

    sender = sealer(project, "site-1", fetch)
    keys, problems = sender.receiver_keys(["site-2", "site-3", "site-4"])
    assert (
        list(keys) == ["site-2"]
        and "not to 'site-3'" in problems["site-3"]
        and problems["site-4"].startswith("no certificate")
    )
    sender.receiver_keys(["site-2"])
    assert asked == [["site-2", "site-3", "site-4"]]  # a verified certificate is not asked for again


def test_a_site_whose_own_certificate_names_another_site_cannot_seal(project):
    ca, creds = project
    with pytest.raises(ValueError, match="own certificate cannot seal"):
        Sealer("site-2", JOB, *creds["site-1"], ca.root_pem, lambda names: {})


def packed(entries, body: bytes = b"") -> bytes:
    header = json.dumps(entries).encode()
    return MAGIC + len(header).to_bytes(8, "little") + header + body


@pytest.mark.parametrize(
    "data, why",
    [
        (b"nonsense", "not a packed model"),
        (MAGIC + (1 << 30).to_bytes(8, "little") + b"[]", "a header of"),
        (MAGIC + (3).to_bytes(8, "little") + b"[[[", "unreadable header"),
        (packed({"w": 1}), "not a list"),
        (packed([["w", "|O", [1]]], b"\0" * 8), "not a number or boolean"),
        (packed([["w", ">f4", [1]]], b"\0" * 4), "not a number or boolean"),
        (packed([["w", "<f4", [-1]]]), "not non-negative integers"),
        (packed([["w", "<f4", [2]]], b"\0" * 4), "entries of 8 bytes, 4 bytes after the header"),
        (packed([["w", "<f4", [1]], ["w", "<f4", [1]]], b"\0" * 8), "a key named twice"),
        (packed([["w", "<f4", [1 << 39]]]), "entries of more than"),
        (packed([[f"k{i}", "<f4", [0]] for i in range(11)]), "at most 10 entries"),
        (MAGIC + (4000).to_bytes(8, "little") + b"[" * 4000, "unreadable header"),
    ],
)
def test_a_malformed_plaintext_is_refused_before_any_array_is_built(data, why):
    arrays, problem = unpack(data, max_entries=10, max_bytes=1 << 20)
    assert arrays is None and why in problem


def test_packing_keeps_keys_dtypes_and_shapes_and_refuses_objects():
    arrays, problem = unpack(pack(MODEL), max_entries=10, max_bytes=1 << 20)
    assert problem == "" and {k: (v.dtype, v.shape) for k, v in arrays.items()} == {
        k: (v.dtype, v.shape) for k, v in MODEL.items()
    }
    big_endian = np.arange(3, dtype=">f4")
    np.testing.assert_array_equal(unpack(pack({"b": big_endian}), 1, 100)[0]["b"], big_endian)
    with pytest.raises(ValueError, match="only numbers and booleans"):
        pack({"o": np.array([object()])})


def test_a_certificate_a_site_or_the_server_issued_with_its_own_key_is_refused(project):
    ca, creds = project
    # site-2 acts as a CA: it signs a certificate named site-1 with its own provisioned key
    site2_key = serialization.load_pem_private_key(creds["site-2"][0], password=None)
    site2_cert = x509.load_pem_x509_certificate(creds["site-2"][1])
    fake_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = datetime.datetime.now(datetime.timezone.utc)
    forged = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "site-1")]))
        .issuer_name(site2_cert.subject)
        .public_key(fake_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(site2_key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM)
    )
    assert "2 certificates where the project's root CA issues one" in certificate_problem(
        forged + creds["site-2"][1], "site-1", ca.cert
    )
    assert "root CA did not issue" in certificate_problem(forged, "site-1", ca.cert)


def test_a_certificate_with_a_weak_rsa_key_is_refused(project):
    ca, _ = project
    _, weak = ca.issue("site-9", key_size=1024)
    assert "an RSA key of 1024 bits" in certificate_problem(weak, "site-9", ca.cert)
