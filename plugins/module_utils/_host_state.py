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
import errno
import grp
import hashlib
import ipaddress
import json
import math
import os
import pwd
import re
import shlex
import signal
import socket
import ssl
import stat
import subprocess
import time
from urllib.parse import urlsplit

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


# `rc-service NAME status` exit codes (openrc-run.sh, supervise-daemon.sh) as the unit states systemd reports
OPENRC_STATES = {0: ("active", "running"), 3: ("inactive", "dead"), 4: ("deactivating", "stop"),
                 8: ("activating", "start"), 16: ("inactive", "inactive"), 32: ("failed", "crashed"),
                 64: ("failed", "unsupervised")}
SERVICE_MANAGERS = ("systemd", "openrc")


def openrc_unit_state(script_exists, status_rc, enabled, child_pid):
    """An OpenRC service in the shape of ``systemctl show``'s properties (UNIT_PROPERTIES), so that the role reads
    one shape under either init: the script in /etc/init.d is the unit, the default runlevel its enablement, the
    child supervise-daemon runs its main process."""
    if not script_exists:
        return {"LoadState": "not-found", "ActiveState": "inactive", "SubState": "dead", "UnitFileState": "",
                "MainPID": "0", "NeedDaemonReload": "no"}
    active, sub = OPENRC_STATES.get(status_rc, ("failed", "unknown"))
    pid = child_pid.strip() if active == "active" and child_pid.strip().isdigit() else "0"
    return {"LoadState": "loaded", "ActiveState": active, "SubState": sub,
            "UnitFileState": "enabled" if enabled else "disabled", "MainPID": pid, "NeedDaemonReload": "no"}


def service_manager(asked, systemd_booted, has_openrc):
    """The init that runs services on the host: the one asked for, else systemd when it booted the host, OpenRC
    when its tools are there, systemd otherwise."""
    if asked in SERVICE_MANAGERS:
        return asked
    if systemd_booted:
        return "systemd"
    return "openrc" if has_openrc else "systemd"


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


class CommandError(HostStateError):
    """A command that could not be started, or did not finish within its time (``timed_out``); the message names
    the command and says why, and the result reports it as ``cmd``."""

    def __init__(self, command, reason, timed_out=False):
        super(CommandError, self).__init__("%s: %s" % (command, reason), cmd=command)
        self.command = command
        self.reason = reason
        self.timed_out = timed_out


def check_timeout(option, seconds):
    """``seconds`` as a time to wait, or HostStateError naming ``option``."""
    if not (seconds > 0 and math.isfinite(seconds)):
        raise HostStateError("%s: %g: use a number of seconds above 0" % (option, seconds))
    return seconds


def check_status_url(option, url):
    """``url`` if it is an http or https URL with a host, else HostStateError naming ``option`` and the value:
    nothing else (such as a local file) is read."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        raise HostStateError("%s: %r is not a URL (%s); write http://HOST:PORT/PATH or https://..." % (
            option, url, exc)) from exc
    if parts.scheme.lower() not in ("http", "https"):
        if "://" in url:
            hint = "only http:// and https:// URLs are read"
        else:
            hint = "write it with its scheme, such as http://%s" % url
        raise HostStateError("%s: %r is not an http or https URL; %s" % (option, url, hint))
    if not host:
        raise HostStateError("%s: %r names no host; write %s://HOST:PORT%s" % (
            option, url, parts.scheme.lower(), parts.path or "/"))
    return url


def _seconds(seconds):
    return "%gs" % seconds


def _why_not_run(path, exc):
    """Why ``path`` could not be started, in words: a directory, a file without execute permission, else the
    system's reason."""
    if os.path.isdir(path):
        return "%s is a directory, not a program" % path
    if exc.errno == errno.EACCES and os.path.isfile(path):
        try:
            mode = "%04o" % stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            mode = "?"
        return "%s is not executable (mode %s)" % (path, mode)
    if exc.errno == errno.ENOEXEC:
        return "%s is not a program this host can run (%s)" % (path, exc.strerror)
    if exc.errno == errno.ENOENT and os.path.isfile(path):
        return "%s cannot be run: the interpreter its #! line names, or its loader, is not there" % path
    return "%s cannot be run: %s" % (path, exc.strerror or exc)


def _text(data):
    return data.decode("utf-8", "replace") if data else ""


def _kill(proc):
    """Kill ``proc`` and every process it started (its own session), and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        # a process that left the session still holds the pipes: stop reading them
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
        proc.wait()


def run_command(argv, timeout=None, shown=None):
    """(rc, stdout, stderr) of ``argv``, run without a shell and with ``LC_ALL=C``.

    Raises CommandError naming the command (``shown``, else ``argv`` quoted as a shell would) when it cannot be
    started (nothing there, a directory, a file without execute permission, not a program) and when it is still
    running after ``timeout`` seconds: it and every process it started are killed first. Without ``timeout`` it
    is waited for."""
    command = shown or " ".join(shlex.quote(part) for part in argv)
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=dict(os.environ, LC_ALL="C"), close_fds=True, start_new_session=True)
    except OSError as exc:
        raise CommandError(command, _why_not_run(argv[0], exc)) from exc
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill(proc)
        raise CommandError(command, "did not finish within %s and was killed" % _seconds(timeout),
                           timed_out=True) from exc
    return proc.returncode, _text(out), _text(err)


class HostReader(object):
    """The readings that run a command on the host (package manager, systemctl, a Python, a program's
    ``--version``), each bounded by ``timeout`` seconds when given. A command that cannot be started or does not
    finish in time raises CommandError, but where the reading has a place for why (a Python, a program)."""

    def __init__(self, module, timeout=None):
        self.module = module
        self.timeout = timeout

    def run(self, argv, shown=None):
        return run_command(argv, self.timeout, shown)

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

    def init_service(self, name, manager="auto"):
        """The service ``name`` under the host's init (``manager``: systemd, openrc, or auto to detect it), as
        systemd's unit properties, with ``Manager`` and ``Available`` (the init's tools are on the host)."""
        rc_service = self.module.get_bin_path("rc-service")
        manager = service_manager(manager, os.path.isdir("/run/systemd/system"), bool(rc_service))
        if manager == "systemd":
            found = self.service(name + ".service")
            return dict(found, Manager=manager, Available=bool(self.module.get_bin_path("systemctl")))
        if not rc_service:
            return {"Manager": manager, "Available": False}
        script = os.path.join("/etc/init.d", name)
        if not os.path.isfile(script):
            return dict(openrc_unit_state(False, 3, False, ""), Manager=manager, Available=True)
        rc, _out, _err = self.run([rc_service, name, "status"])
        try:
            with open(os.path.join("/run/openrc/options", name, "child_pid")) as f:
                child_pid = f.read()
        except (IOError, OSError):
            child_pid = ""
        enabled = os.path.lexists(os.path.join("/etc/runlevels/default", name))
        return dict(openrc_unit_state(True, rc, enabled, child_pid), Manager=manager, Available=True)

    @staticmethod
    def json_url(url, timeout, ca_path=None, error_body=False):
        """(the JSON a GET of ``url`` answers, '') or (None, why not): a status page read, never an error. An
        https URL is verified, against ``ca_path`` when given. With ``error_body``, an error status whose body is
        JSON is read like a 200 (``/healthz`` answers 503 with its reason). A URL that is not http or https raises
        HostStateError: nothing else is read."""
        from ansible.module_utils.urls import open_url
        from ansible.module_utils.six.moves.urllib.error import HTTPError

        check_status_url("url", url)
        try:
            with open_url(url, timeout=timeout, validate_certs=True, ca_path=ca_path) as response:
                return json.loads(response.read().decode("utf-8")), ""
        except HTTPError as exc:
            if error_body:
                try:
                    return json.loads(exc.read().decode("utf-8")), ""
                except ValueError:  # a body that is not JSON: the status says it
                    pass
            return None, str(exc)
        except Exception as exc:  # any other failure means the service does not answer
            return None, str(exc)

    def binary(self, path):
        """What ``<path> --version`` says (rc, stdout, stderr) and the program's mtime. A program that is not
        there is reported with rc 127, one that cannot be run (a directory, no execute permission, not a
        program) with rc 126, both with mtime None; one that does not finish in time is killed and reported
        with rc 124. stderr says why."""
        if not os.path.exists(path):
            return {"rc": 127, "stdout": "", "stderr": "%s: not found" % path, "mtime": None}
        try:
            rc, out, err = self.run([path, "--version"])
        except CommandError as exc:
            if not exc.timed_out:
                return {"rc": 126, "stdout": "", "stderr": exc.reason, "mtime": None}
            rc, out, err = 124, "", str(exc)
        try:
            mtime = os.stat(path).st_mtime_ns / 1e9
        except OSError:
            mtime = None
        return {"rc": rc, "stdout": out.strip(), "stderr": err.strip(), "mtime": mtime}

    def python(self, interpreter, names):
        """Whether ``interpreter`` is there and runs, and the version and location of each distribution it has.
        Nothing there: exists false, no error; there but it cannot be run (a directory, no execute permission,
        not a program): exists false, and error says why."""
        if not os.path.exists(interpreter):
            return {"exists": False, "error": "", "distributions": parse_distributions(names, 1, "")}
        try:
            rc, out, err = self.run([interpreter, "-c", _DISTRIBUTIONS] + list(names),
                                    shown="%s -c <the distributions' reader>" % shlex.quote(interpreter))
        except CommandError as exc:
            if exc.timed_out:
                raise
            return {"exists": False, "error": exc.reason, "distributions": parse_distributions(names, 1, "")}
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
