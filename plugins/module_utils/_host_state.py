# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a host's state in one module run. Private to the collection.

A role reads, in one round trip, everything its tasks would look at (files,
packages, accounts, units, Python distributions), compares it on the
controller with what it wants, and skips every task whose target is already
as wanted: a run with nothing to change costs one module run per host
instead of one or two per task. nats_server_state and host_state read
through these functions; nothing here changes the host.
"""

from __future__ import annotations

import base64
import grp
import hashlib
import ipaddress
import json
import os
import pwd
import re
import socket
import ssl
import stat
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError

UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "UnitFileState", "MainPID", "NeedDaemonReload")

# Run with the Python asked about: the version and install location of each distribution named.
_DISTRIBUTIONS = """
import importlib.metadata as m, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        dist = m.distribution(name)
    except m.PackageNotFoundError:
        found[name] = None
    else:
        found[name] = {"version": dist.version, "location": str(dist.locate_file(""))}
print(json.dumps(found))
"""


def _name(lookup, ident):
    try:
        return lookup(ident)
    except KeyError:
        return str(ident)


def describe_path(path):
    """What a role compares a managed file or directory with: type, owner, group, mode, mtime, checksum."""
    try:
        info = os.lstat(path)
    except OSError:
        return {"exists": False}
    if stat.S_ISLNK(info.st_mode):
        kind = "link"
    elif stat.S_ISDIR(info.st_mode):
        kind = "directory"
    elif stat.S_ISREG(info.st_mode):
        kind = "file"
    else:
        kind = "other"
    out = {
        "exists": True,
        "type": kind,
        "owner": _name(lambda uid: pwd.getpwuid(uid).pw_name, info.st_uid),
        "group": _name(lambda gid: grp.getgrgid(gid).gr_name, info.st_gid),
        "mode": "%04o" % stat.S_IMODE(info.st_mode),
        "mtime": info.st_mtime_ns / 1e9,
    }
    if kind == "file":
        out["checksum"] = file_sha1(path)
    return out


def file_sha1(path):
    digest = hashlib.sha1()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(65536), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def list_directory(path):
    """The regular files directly in ``path`` by name, with their sizes in bytes; None when ``path`` is
    not a directory that can be read. Nothing is read from the files."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return None
    found = {}
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                found[entry.name] = entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return found


def parse_unit_properties(text):
    """``Key=Value`` lines of ``systemctl show`` as a dict."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def parse_package_version(manager, rc, stdout):
    """(installed, version) from ``dpkg-query -W -f '${db:Status-Status} ${Version}'`` or ``rpm -q --qf``."""
    text = stdout.strip()
    if rc != 0 or not text:
        return False, ""
    if manager == "dpkg":
        status, _sep, version = text.partition(" ")
        return (True, version) if status == "installed" else (False, "")
    return True, text


def unit_name(name):
    """A unit named without its type is a service, as systemctl takes it."""
    return name if "." in name else name + ".service"


def parse_distributions(names, rc, stdout):
    """What the distributions' reader printed, or every name unknown when it did not run."""
    if rc == 0:
        try:
            found = json.loads(stdout)
        except ValueError:
            found = None
        if isinstance(found, dict):
            return dict((name, found.get(name)) for name in names)
    return dict((name, None) for name in names)


def read_user(name):
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return {"exists": False}
    return {"exists": True, "uid": entry.pw_uid, "gid": entry.pw_gid,
            "group": _name(lambda gid: grp.getgrgid(gid).gr_name, entry.pw_gid),
            "home": entry.pw_dir, "shell": entry.pw_shell}


def read_group(name):
    try:
        entry = grp.getgrnam(name)
    except KeyError:
        return {"exists": False}
    return {"exists": True, "gid": entry.gr_gid}


# The subsets ansible.builtin.setup gathers whatever it is asked for.
MINIMAL_FACTS = frozenset(["apparmor", "caps", "cmdline", "date_time", "distribution", "dns", "env", "fips", "local",
                           "lsb", "pkg_mgr", "platform", "python", "selinux", "service_mgr", "ssh_pub_keys", "user"])


class HostStateError(NatsEdgeError):
    """A reading the host cannot be asked for, worded for the user."""


def gather_facts(module, subset, timeout=10):
    """The host's facts of ``subset``, gathered and named as ansible.builtin.setup gathers and names them; an unknown
    subset name raises HostStateError."""
    from ansible.module_utils.facts import ansible_collector, default_collectors
    from ansible.module_utils.facts.namespace import PrefixFactNamespace

    try:
        collector = ansible_collector.get_ansible_collector(
            all_collector_classes=default_collectors.collectors,
            namespace=PrefixFactNamespace(namespace_name="ansible", prefix="ansible_"),
            filter_spec=[], gather_subset=subset, gather_timeout=timeout, minimal_gather_subset=MINIMAL_FACTS)
    except Exception as exc:  # an unknown subset name, as setup reports it
        raise HostStateError("gather_subset: %s" % exc) from exc
    return collector.collect(module=module)


class HostReader(object):
    """The readings that run a command on the host (package manager, systemctl, a Python)."""

    def __init__(self, module):
        self.module = module

    def run(self, argv):
        return self.module.run_command(argv, check_rc=False, environ_update={"LC_ALL": "C"})

    def package(self, name):
        for manager, argv in (("dpkg", ["dpkg-query", "-W", "-f", "${db:Status-Status} ${Version}", name]),
                              ("rpm", ["rpm", "-q", "--qf", "%{VERSION}", name])):
            tool = self.module.get_bin_path(argv[0])
            if tool:
                rc, out, _err = self.run([tool] + argv[1:])
                installed, version = parse_package_version(manager, rc, out)
                return {"installed": installed, "version": version, "manager": manager}
        return {"installed": None, "version": "", "manager": None}

    def service(self, unit):
        systemctl = self.module.get_bin_path("systemctl")
        if not systemctl:
            return {}
        rc, out, _err = self.run([systemctl, "show", unit_name(unit), "--property=" + ",".join(UNIT_PROPERTIES)])
        return parse_unit_properties(out) if rc == 0 else {}

    @staticmethod
    def json_url(url, timeout, ca_path=None):
        """(the JSON a GET of ``url`` answers, '') or (None, why not): a status page read, never an error. An
        https URL is verified, against ``ca_path`` when given."""
        from ansible.module_utils.urls import open_url

        try:
            with open_url(url, timeout=timeout, validate_certs=True, ca_path=ca_path) as response:
                return json.loads(response.read().decode("utf-8")), ""
        except Exception as exc:  # any failure means the service does not answer
            return None, str(exc)

    def python(self, interpreter, names):
        """Whether ``interpreter`` is there, and the version and location of each distribution it has."""
        if not os.access(interpreter, os.X_OK):
            return {"exists": False, "error": "", "distributions": parse_distributions(names, 1, "")}
        rc, out, err = self.run([interpreter, "-c", _DISTRIBUTIONS] + list(names))
        return {"exists": True, "error": "" if rc == 0 else (err.strip() or "exit status %d" % rc),
                "distributions": parse_distributions(names, rc, out)}


# --------------------------------------------------------------------------
# the certificate a server serves


_PEM_CERT = re.compile(r"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.S)


def pem_sha256(path):
    """(SHA-256 of the first certificate in a PEM file, hex, '') or (None, why not)."""
    try:
        with open(path) as handle:
            match = _PEM_CERT.search(handle.read())
    except (OSError, UnicodeDecodeError) as exc:
        return None, "%s: %s" % (path, getattr(exc, "strerror", None) or exc)
    if not match:
        return None, "%s holds no PEM certificate" % path
    try:
        der = base64.b64decode("".join(match.group(1).split()), validate=True)
    except ValueError as exc:
        return None, "%s: %s" % (path, exc)
    return hashlib.sha256(der).hexdigest(), ""


def served_certificate(host, port, timeout):
    """(DER of the certificate a NATS listener serves, '') or (None, why not).

    A NATS client or leafnode listener sends its INFO line in plaintext, then the client starts TLS. Only the
    certificate is read, so it is not verified here: the caller compares it with the file it expects."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            line = sock.makefile("rb").readline(65536)
            if not line.startswith(b"INFO "):
                return None, "%s:%s did not answer with INFO" % (host, port)
            with context.wrap_socket(sock, server_hostname=None) as tls:
                der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as exc:
        return None, "%s:%s: %s" % (host, port, exc)
    if not der:
        return None, "%s:%s served no certificate" % (host, port)
    return der, ""


def tls_state(host, port, cert_file, timeout):
    """What a listener serves and what the certificate file holds, each as a SHA-256 (hex)."""
    der, served_error = served_certificate(host, port, timeout)
    wanted, file_error = pem_sha256(cert_file) if cert_file else (None, "")
    return {"served": hashlib.sha256(der).hexdigest() if der else None, "file": wanted,
            "error": "; ".join(e for e in (served_error, file_error) if e)}


# --------------------------------------------------------------------------
# a certificate, its key and its CA, checked as a peer checks them


class _Refused(Exception):
    """A refusal: ``side`` is the end of a handshake that refused ('server', 'client'), or the file at fault
    ('cert', 'key', 'ca') once check_certificate has told which."""

    def __init__(self, side, error):
        super(_Refused, self).__init__(str(error))
        self.side = side
        self.error = error


def _handshake(server_context, client_context):
    """A TLS handshake between two contexts in memory; the client's view of the server's certificate (verified)."""
    buffers = dict((name, ssl.MemoryBIO()) for name in ("to_server", "to_client", "from_server", "from_client"))
    ends = {
        "server": (server_context.wrap_bio(buffers["to_server"], buffers["from_server"], server_side=True),
                   buffers["from_server"], buffers["to_client"]),
        "client": (client_context.wrap_bio(buffers["to_client"], buffers["from_client"]),
                   buffers["from_client"], buffers["to_server"]),
    }
    pending = set(ends)
    for _round in range(20):
        for side in ("client", "server"):
            tls, outgoing, peer = ends[side]
            if side in pending:
                try:
                    tls.do_handshake()
                    pending.discard(side)
                except ssl.SSLWantReadError:
                    pass
                except (ssl.SSLError, ValueError) as exc:
                    raise _Refused(side, exc) from exc
            data = outgoing.read()
            if data:
                peer.write(data)
        if not pending:
            # TLS 1.3: the server checks the client's certificate as it reads the client's last flight
            return ends["client"][0].getpeercert()
    raise _Refused("client", ssl.SSLError("the handshake did not finish"))


def _reason(exc):
    """An ssl error as one short line: what verification said, else OpenSSL's reason."""
    return getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or getattr(
        exc, "strerror", None) or str(exc)


def check_certificate(cert_file, key_file, ca_file=None, mutual=False):
    """A certificate checked as nats-server and its peers check it, in a TLS handshake in memory: the key matches
    the certificate, the chain verifies against the CA (the system's roots without one) and the certificate is
    valid now; with ``mutual``, the same certificate is also accepted as a client's (routes and leaf remotes
    present it to their peers).

    The certificate's own dates are not judged here but returned (its chain's are): the caller compares them with
    its clock and its renewal margin. Returns ``{"problems": [{"file": "cert"|"key"|"ca", "error": ...}],
    "not_before": epoch seconds, "not_after": epoch seconds (None when unread), "sans": {"dns": [...],
    "ip": [...]}}``. Reads only; the files are not changed."""
    out = {"problems": [], "not_before": None, "not_after": None, "sans": {"dns": [], "ip": []}}

    def problem(which, error):
        out["problems"].append({"file": which, "error": error})
        return out

    for which, path in (("cert", cert_file), ("key", key_file), ("ca", ca_file)):
        if path and not os.path.isfile(path):
            return problem(which, "%s: no such file" % path)
    try:
        peer = _verify(cert_file, key_file, ca_file, mutual, check_time=False)
    except _Refused as exc:
        return problem(exc.side, exc.args[0])
    out["not_before"] = ssl.cert_time_to_seconds(peer["notBefore"])
    out["not_after"] = ssl.cert_time_to_seconds(peer["notAfter"])
    for kind, value in peer.get("subjectAltName", ()):
        if kind == "DNS":
            out["sans"]["dns"].append(value)
        elif kind == "IP Address":
            try:  # OpenSSL spells an IPv6 address out in full
                value = ipaddress.ip_address(value.strip()).compressed
            except ValueError:
                value = value.strip()
            out["sans"]["ip"].append(value)
    if out["not_before"] <= time.time() < out["not_after"]:
        # the certificate's own dates are the caller's to report: here the rest of its chain, now
        try:
            _verify(cert_file, key_file, ca_file, mutual, check_time=True)
        except _Refused as exc:
            return problem(exc.side, exc.args[0])
    return out


# OpenSSL's X509_V_FLAG_NO_CHECK_TIME: the chain verified apart from the dates, so an expired certificate still
# tells its dates
_NO_CHECK_TIME = 0x200000


def _server(cert_file, key_file):
    """A server context holding the certificate and its key, or _Refused(file, why)."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        server.load_cert_chain(cert_file, key_file, password=lambda: b"")
    except ssl.SSLError as exc:
        reason = _reason(exc)
        if "KEY_VALUES_MISMATCH" in str(exc) or reason == "KEY_VALUES_MISMATCH":
            raise _Refused("key", "%s does not match the certificate's public key" % key_file) from exc
        if "PEM" in str(exc) and "key" not in str(exc).lower():
            raise _Refused("cert", "%s: not a PEM certificate (%s)" % (cert_file, reason)) from exc
        raise _Refused("key", "%s: cannot be loaded with the certificate (%s)" % (key_file, reason)) from exc
    except OSError as exc:
        raise _Refused("cert", "%s: %s" % (cert_file, _reason(exc))) from exc
    return server


def _verify(cert_file, key_file, ca_file, mutual, check_time):
    """The handshake of check_certificate, both ends made afresh (a strict pass shares no flag with the one that
    ignored the dates): the client's view of the server's certificate, or _Refused(file, why)."""
    trusted = ca_file or "the system's CAs"
    server = _server(cert_file, key_file)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    try:
        if ca_file:
            client.load_verify_locations(cafile=ca_file)
        else:
            client.load_default_certs()
    except (ssl.SSLError, OSError) as exc:
        raise _Refused("ca", "%s: no usable CA certificate (%s)" % (ca_file, _reason(exc))) from exc
    if not check_time:
        client.verify_flags = client.verify_flags | _NO_CHECK_TIME
    if mutual:
        server.verify_mode = ssl.CERT_REQUIRED
        if ca_file:
            server.load_verify_locations(cafile=ca_file)
        else:
            server.load_default_certs()
        if not check_time:
            server.verify_flags = server.verify_flags | _NO_CHECK_TIME
        client.load_cert_chain(cert_file, key_file, password=lambda: b"")
    try:
        return _handshake(server, client)
    except _Refused as exc:
        if exc.side == "client":
            raise _Refused("cert", "%s does not verify against %s: %s" % (cert_file, trusted, _reason(exc.error))) from exc
        raise _Refused("cert", "%s is not accepted as a client's certificate by a peer that trusts %s (routes and "
                       "leaf remotes present it): %s" % (cert_file, trusted, _reason(exc.error))) from exc
