# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind the ``nats_server`` role: the server config as data.

Each filter is a thin wrapper over ``plugin_utils._server_config`` that
turns its ``ConfigError`` into an ``AnsibleFilterError`` naming the field.
"""

from __future__ import annotations

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _certificates
from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _server_config as sc
from ansible_collections.nats_edge.fleet.plugins.plugin_utils._data import filter_decorator


_filter = filter_decorator(sc.ConfigError, "nats_server")


@_filter
def nats_server_config(settings):
    conf = sc.build_config(dict(settings))
    host = settings.get("inventory_hostname") or settings.get("name")
    plaintext = sorted(sc.plaintext_listeners(settings))
    warnings = []
    if plaintext:
        warnings.append("the %s listener(s) run in plaintext (%s): anyone on the network reads and alters what "
                        "they carry" % (", ".join(plaintext), sc.PLAINTEXT_VAR))
    if conf.get("allow_non_tls"):
        warnings.append("the client listener takes plaintext clients too (nats_server_tls_allow_non_tls)")
    if settings.get("allow_anonymous") and "operator" not in conf and "authorization" not in conf:
        warnings.append("clients may connect without authenticating (nats_server_allow_anonymous)")
    if warnings:
        from ansible.utils.display import Display

        for warning in warnings:
            Display().warning("nats_server on %s: %s" % (host, warning))
    return conf


@_filter
def nats_server_prune(conf, version):
    return sc.prune_for_version(conf, version)[0]


@_filter
def nats_server_pruned_keys(conf, version):
    return sc.prune_for_version(conf, version)[1]


@_filter
def nats_server_version_problems(conf, version):
    """The options set for a server version too old for them that cannot be left out (the leaf remotes', the
    client port's TLS handshake first), as messages."""
    return sc.version_problems(conf, version)


@_filter
def nats_server_restart_fingerprint(conf, version=None):
    return sc.restart_fingerprint(conf, version or None)


@_filter
def nats_server_fingerprint_restart(new, previous):
    """Whether going from the ``previous`` restart fingerprint to ``new`` needs a restart (a reload is enough when
    only leaf remotes a 2.14+ server reloads were added or removed)."""
    return sc.fingerprint_needs_restart(previous, new)


@_filter
def nats_server_listener_conflicts(conf):
    return sc.listener_conflicts(conf)


@_filter
def to_nats_conf(conf, header=None):
    return sc.render(conf, header)


@_filter
def nats_server_arch(ansible_architecture):
    return sc.upstream_arch(ansible_architecture)


@_filter
def nats_server_version(text):
    return ".".join(str(part) for part in sc.parse_version(text))


@_filter
def nats_version_compare(left, right):
    """-1, 0 or 1, comparing two nats-server versions numerically."""
    a, b = sc.parse_version(left), sc.parse_version(right)
    return (a > b) - (a < b)


@_filter
def nats_server_profile(memtotal_mb, mounts, store_dir, **limits):
    return sc.resource_profile(memtotal_mb, mounts, store_dir, **limits)


@_filter
def nats_server_peer_urls(members, hostvars, scheme, port_var, default_port, self_name=None):
    return sc.peer_urls(members, hostvars, scheme, port_var, default_port, self_name)


@_filter
def nats_server_monitor(variables):
    return sc.monitor_endpoint(variables)


@_filter
def nats_server_remote_credentials(remotes, config_dir):
    """[{src, dest}] for the leaf remotes whose credentials the role pushes."""
    return [
        {"src": remote["credentials_src"], "dest": sc.remote_credentials(config_dir, remote, i)}
        for i, remote in enumerate(remotes or [])
        if isinstance(remote, dict) and remote.get("credentials_src")
    ]


@_filter
def nats_timestamp(value):
    return sc.parse_timestamp(value)


@_filter
def nats_duration_seconds(value, field="duration"):
    return sc.duration_seconds(value, field)


@_filter
def nats_size(value, field="size"):
    return sc.parse_size(value, field)


def _current(found, wanted):
    if not found.get("exists") or found.get("type") != wanted.get("kind", "file"):
        return False
    for key in ("owner", "group"):
        # an owner or group not asked for is not compared
        if wanted.get(key) not in (None, "") and str(found.get(key)) != str(wanted[key]):
            return False
    try:
        if int(str(found.get("mode")), 8) != int(str(wanted.get("mode")), 8):
            return False
    except ValueError:
        return False
    return wanted.get("checksum") is None or found.get("checksum") == wanted["checksum"]


def nats_server_stale_paths(files, wanted):
    """The paths of ``wanted`` ([{path, kind, owner, group, mode, checksum}]) that are not yet as
    wanted on the host, as nats_server_state described it in ``files``."""
    files = files or {}
    return [item["path"] for item in wanted or [] if not _current(files.get(item["path"]) or {}, item)]


def nats_server_masked_diff(after, before, secrets, name="config"):
    """A unified diff of ``before`` and ``after`` with every secret in ``secrets`` masked (as written, and as a URL
    carries it), as lines."""
    import difflib
    from urllib.parse import quote

    forms = sorted(set(form for secret in secrets or [] if secret for form in (str(secret), quote(str(secret), safe=""))),
                   key=len, reverse=True)

    def masked(text):
        text = str(text or "")
        for form in forms:
            text = text.replace(form, "********")
        return text.splitlines()

    return list(difflib.unified_diff(masked(before), masked(after), "before: " + name, "after: " + name, lineterm=""))


@filter_decorator(_certificates.CertificateError, "nats_server")
def nats_server_tls_problems(check, host, files, names, renew_before, now=None):
    return _certificates.problems(check, host, files, names, renew_before, now=now)


# the systemd sandbox of every service the collection installs, in this order
_HARDENING_HEAD = ("NoNewPrivileges=true", "CapabilityBoundingSet=", "ProtectSystem=strict")
_HARDENING_BODY = ("ProtectHome=true", "PrivateTmp=true", "PrivateDevices=true", "ProtectKernelTunables=true",
                   "ProtectKernelModules=true", "ProtectKernelLogs=true", "ProtectControlGroups=true",
                   "ProtectClock=true", "ProtectHostname=true")
_HARDENING_TAIL = ("RestrictNamespaces=true", "RestrictRealtime=true", "RestrictSUIDSGID=true", "LockPersonality=true")


def nats_systemd_hardening(read_write_paths, address_families=None, deny_write_execute=True, comment=""):
    """The [Service] lines that sandbox a unit: the filesystem read-only but ``read_write_paths``, no privileges,
    the kernel's tunables and the host's devices out of reach, sockets of ``address_families`` only."""
    paths = [read_write_paths] if isinstance(read_write_paths, str) else list(read_write_paths or [])
    lines = list(_HARDENING_HEAD)
    if paths:
        lines.append("ReadWritePaths=" + " ".join(str(path) for path in paths))
    lines += list(_HARDENING_BODY)
    if comment:
        lines.append("# " + comment)
    lines.append("RestrictAddressFamilies=" + " ".join(address_families or ("AF_INET", "AF_INET6", "AF_UNIX")))
    lines += list(_HARDENING_TAIL)
    if deny_write_execute:
        lines.append("MemoryDenyWriteExecute=true")
    lines += ["SystemCallArchitectures=native", "UMask=0027"]
    return "\n".join(lines)


class FilterModule(object):
    def filters(self):
        return {
            "nats_server_config": nats_server_config,
            "nats_server_prune": nats_server_prune,
            "nats_server_pruned_keys": nats_server_pruned_keys,
            "nats_server_restart_fingerprint": nats_server_restart_fingerprint,
            "nats_server_version_problems": nats_server_version_problems,
            "nats_server_fingerprint_restart": nats_server_fingerprint_restart,
            "nats_server_listener_conflicts": nats_server_listener_conflicts,
            "to_nats_conf": to_nats_conf,
            "nats_server_arch": nats_server_arch,
            "nats_server_version": nats_server_version,
            "nats_version_compare": nats_version_compare,
            "nats_server_profile": nats_server_profile,
            "nats_server_peer_urls": nats_server_peer_urls,
            "nats_server_monitor": nats_server_monitor,
            "nats_systemd_hardening": nats_systemd_hardening,
            "nats_server_remote_credentials": nats_server_remote_credentials,
            "nats_timestamp": nats_timestamp,
            "nats_duration_seconds": nats_duration_seconds,
            "nats_size": nats_size,
            "nats_server_stale_paths": nats_server_stale_paths,
            "nats_server_masked_diff": nats_server_masked_diff,
            "nats_server_tls_problems": nats_server_tls_problems,
        }
