# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a certificate check found, judged on the controller. Private to the collection.

nats_server_state checks a server's certificate, key and CA on the host, where the key is (a TLS handshake in
memory: the key matches, the chain verifies, peers accept it as a client's); it returns the certificate's dates
and names. Here those are held against the controller's clock, the renewal margin and the names peers and
clients reach the host by, and every problem becomes one message naming the host, the file and the name or date.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
import time

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError

RENEW_VAR = "nats_server_tls_renew_before"
NAMES_VAR = "nats_server_tls_names"


class CertificateError(NatsEdgeError, ValueError):
    """Input the check cannot judge."""


def host_of(name):
    """The host part of a name that may carry a port (``host:port``, ``[v6]:port``); '' for none."""
    name = str(name or "").strip()
    if not name:
        return ""
    match = re.match(r"^\[([^\]]+)\](?::\d+)?$", name)
    if match:
        return match.group(1)
    if name.count(":") == 1:
        return name.split(":", 1)[0]
    return name


def _ip(name):
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def covers(sans, name):
    """Whether a certificate with ``sans`` ({"dns": [...], "ip": [...]}) is valid for ``name``, as TLS clients
    match it: an address against the IP names, a host name against the DNS names (a leading ``*`` stands for
    exactly one label), case aside."""
    address = _ip(name)
    if address is not None:
        return any(_ip(ip) == address for ip in sans.get("ip") or [])
    name = name.rstrip(".").lower()
    for pattern in sans.get("dns") or []:
        pattern = pattern.rstrip(".").lower()
        if pattern == name:
            return True
        if pattern.startswith("*.") and "." in name and name.split(".", 1)[1] == pattern[2:]:
            return True
    return False


def _day(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def problems(check, host, files, names, renew_before, now=None):
    """Messages for what ``check`` (nats_server_state's ``tls_check``) found, each naming ``host`` and the file
    (``files``: how to call the cert, key and CA in a message): its problems, a certificate not yet valid, expired
    or expiring within ``renew_before`` days, and every name of ``names`` it is not valid for."""
    if not check:
        return []
    try:
        margin = float(renew_before)
    except (TypeError, ValueError):
        margin = -1
    if margin < 0:
        raise CertificateError("%s: %r is not a number of days (0 or more)" % (RENEW_VAR, renew_before))
    now = time.time() if now is None else now
    prefix = "%s: " % host if host else ""
    files = dict(files or {})
    label = dict((part, files.get(part) or "the %s" % part) for part in ("cert", "key", "ca"))
    out = []
    for found in check.get("problems") or []:
        error = found.get("error", "")
        for part in ("cert", "key", "ca"):
            error = error.replace("the %s given" % part, label[part])
        out.append(prefix + error)
    if out:
        return out
    cert = label["cert"]
    not_before, not_after = check.get("not_before"), check.get("not_after")
    if not_before is not None and not_before > now:
        out.append("%scertificate %s is not valid before %s" % (prefix, cert, _day(not_before)))
    if not_after is not None:
        if not_after <= now:
            out.append("%scertificate %s expired on %s" % (prefix, cert, _day(not_after)))
        elif not_after - now < margin * 86400:
            out.append("%scertificate %s expires on %s, within %s (%g days): renew it, or lower %s"
                       % (prefix, cert, _day(not_after), RENEW_VAR, margin, RENEW_VAR))
    sans = check.get("sans") or {}
    held = ["DNS:%s" % n for n in sans.get("dns") or []] + ["IP:%s" % n for n in sans.get("ip") or []]
    wanted = []
    for name in names or []:
        name = host_of(name)
        if name and name not in wanted:
            wanted.append(name)
    for name in wanted:
        if not covers(sans, name):
            out.append("%scertificate %s is not valid for %s, a name peers or clients reach the host by "
                       "(it names %s); issue it for that name too, or correct the name"
                       % (prefix, cert, name, ", ".join(held) or "nothing"))
    return out
