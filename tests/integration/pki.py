"""Certificates for tests of TLS against real servers: a CA, certificates it issues, and strangers'.

Made with the ``cryptography`` library that ansible-core depends on; every file is PEM.
"""

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _key():
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(key, path):
    with open(path, "wb") as handle:
        handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    os.chmod(path, 0o600)


def _write_cert(cert, path):
    with open(path, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))


def _san(names):
    entries = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


class CA:
    """A CA in ``folder`` (``<name>.pem``, ``<name>-key.pem``) that issues certificates."""

    def __init__(self, folder, name="ca", days=3650):
        self.folder = str(folder)
        self.key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test %s" % name)])
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(_now() - datetime.timedelta(minutes=5))
                     .not_valid_after(_now() + datetime.timedelta(days=days))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.path = os.path.join(self.folder, "%s.pem" % name)
        self.key_path = os.path.join(self.folder, "%s-key.pem" % name)
        _write_cert(self.cert, self.path)
        _write_key(self.key, self.key_path)

    def issue(self, name, sans=("localhost", "127.0.0.1"), days=365, key=None, folder=None, ago=0,
              usages=("server", "client")):
        """(cert path, key path) of a certificate for ``sans``, valid from ``ago`` days ago for ``days`` days from
        now (negative: expired), for ``usages`` (server, client)."""
        folder = str(folder or self.folder)
        key = key or _key()
        purposes = {"server": ExtendedKeyUsageOID.SERVER_AUTH, "client": ExtendedKeyUsageOID.CLIENT_AUTH}
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
                .issuer_name(self.cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(_now() - datetime.timedelta(days=ago, minutes=5))
                .not_valid_after(_now() + datetime.timedelta(days=days))
                .add_extension(_san(sans), critical=False)
                .add_extension(x509.ExtendedKeyUsage([purposes[u] for u in usages]), critical=False)
                .sign(self.key, hashes.SHA256()))
        cert_path = os.path.join(folder, "%s.pem" % name)
        key_path = os.path.join(folder, "%s-key.pem" % name)
        _write_cert(cert, cert_path)
        _write_key(key, key_path)
        return cert_path, key_path


def fingerprint(pem_path):
    """SHA-256 of a PEM certificate's DER, hex."""
    with open(pem_path, "rb") as handle:
        cert = x509.load_pem_x509_certificate(handle.read())
    return cert.fingerprint(hashes.SHA256()).hex()
