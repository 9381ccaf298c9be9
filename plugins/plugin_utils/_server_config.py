# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nats-server configuration as data: build, prune by version, classify, render.

Private to the collection. Pure functions, no Ansible imports, so the whole
config logic is unit-tested without a host. The ``nats_server`` role calls
these through the filters in ``plugins/filter/nats_server.py``.
"""

from __future__ import annotations

import copy
import json
import re
from urllib.parse import quote

from ansible_collections.nats_edge.fleet.plugins.module_utils import _units, _versions
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError

_DURATION_RE = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")

# ansible_architecture (or the upstream name itself) -> the suffix upstream release archives use.
ARCHITECTURES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm7",
    "armv7": "arm7",
    "armhf": "arm7",
    "arm7": "arm7",
    "armv6l": "arm6",
    "armv6": "arm6",
    "armel": "arm6",
    "arm6": "arm6",
    "386": "386",
    "i386": "386",
    "i686": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "mips64le": "mips64le",
    "mips64": "mips64le",
    "riscv64": "riscv64",
}

# Options that appeared after the oldest server we support (2.9): a path into
# the config and the first version that accepts it. Older servers reject
# them as unknown fields, so they are dropped for those servers.
MIN_VERSIONS = {
    ("jetstream", "sync_interval"): (2, 10, 0),
    ("jetstream", "max_buffered_msgs"): (2, 11, 0),
    ("jetstream", "max_buffered_size"): (2, 11, 0),
    ("jetstream", "request_queue_limit"): (2, 11, 0),
    ("cluster", "compression"): (2, 10, 0),
    ("cluster", "pool_size"): (2, 10, 0),
    ("cluster", "accounts"): (2, 10, 0),
    ("leafnodes", "compression"): (2, 10, 0),
    ("leafnodes", "remotes", "*", "compression"): (2, 10, 0),
    ("leafnodes", "remotes", "*", "first_info_timeout"): (2, 10, 0),
    ("leafnodes", "tls", "handshake_first"): (2, 10, 0),
    ("leafnodes", "remotes", "*", "tls", "handshake_first"): (2, 10, 0),
    ("gateway", "connect_backoff"): (2, 12, 0),
    # also in 2.11.11 and later 2.11 releases, but not in 2.12.0
    ("gateway", "write_deadline"): (2, 12, 1),
    ("gateway", "write_timeout"): (2, 12, 1),
    # server/feature_flags.go: the block and its first flags came with 2.14.0
    ("feature_flags",): (2, 14, 0),
    ("feature_flags", "js_snapshot_sources"): (2, 15, 0),
    ("leafnodes", "remotes", "*", "disabled"): (2, 12, 0),
    ("leafnodes", "remotes", "*", "isolate_leafnode_interest"): (2, 12, 0),
    ("leafnodes", "remotes", "*", "request_isolation"): (2, 12, 0),
    ("leafnodes", "remotes", "*", "proxy"): (2, 12, 1),
    ("leafnodes", "remotes", "*", "ignore_discovered_servers"): (2, 14, 0),
    # server/opts.go parseRemoteLeafNodes: a remote's own TCP dial timeout (the default is 1s), from 2.14.5 (not in
    # 2.14.0 to 2.14.4, nor in any 2.12 or earlier release)
    ("leafnodes", "remotes", "*", "dial_timeout"): (2, 14, 5),
    # the client port's TLS handshake first: parsed from 2.10.0 but applied to client connections (with its
    # fallback delay form, a duration or "auto") only from 2.10.4 (server/opts.go, o.TLSHandshakeFirst)
    ("tls", "handshake_first"): (2, 10, 4),
}

# Of those, the options whose absence changes what a server does (a disabled remote would connect, a proxied one
# would dial past its proxy): set on a server too old for them, they are refused instead of left out. A false value
# is the server's default and is left out.
REFUSED_BELOW = {
    "disabled", "isolate_leafnode_interest", "request_isolation", "proxy", "ignore_discovered_servers", "dial_timeout",
}
# Outside the leaf remotes, the same for these paths, named by the variable that sets them: left out, the client port
# would send its INFO in plaintext, and the clients that start with the TLS handshake would not connect.
REFUSED_PATHS = {
    ("tls", "handshake_first"): ("nats_server_client_tls_handshake_first",
                                 "the client port would send its INFO in plaintext first, and the clients that "
                                 "start with the TLS handshake would not connect"),
}
CLIENT_HANDSHAKE_FIRST_VAR = "nats_server_client_tls_handshake_first"

# nats-server's feature flags (server/feature_flags.go) and the release that knows each. A server logs a flag it
# does not know as unsupported and runs without it, so a misspelt flag would do nothing: names not listed here are
# refused.
FEATURE_FLAGS = {
    # the v2 format of JetStream's $JS.ACK and $JS.FC reply subjects (with the domain and the account's hash)
    "js_ack_fc_v2": (2, 14, 0),
    # mirrors propose a gap of deleted sequences as one raft entry
    "js_raft_delete_range": (2, 14, 0),
    # replicated stream snapshots carry the stream's sourcing state
    "js_snapshot_sources": (2, 15, 0),
}
FEATURE_FLAGS_VAR = "nats_server_feature_flags"

# From 2.14.0 a reload adds and removes leaf remotes (server/reload.go matches them by their URLs, account and
# credentials); before, any change to the list of remotes but these keys needs a restart.
RELOAD_REMOTES_SINCE = (2, 14, 0)
_RELOADABLE_IN_REMOTE = ("tls", "compression", "handshake_first", "disabled")

# The listeners TLS protects (a leaf node's remotes count as "leafnodes", a gateway's connections to other
# clusters as "gateway"), and the one variable that runs some of them in plaintext.
TLS_LISTENERS = ("client", "cluster", "leafnodes", "websocket", "mqtt", "gateway")
PLAINTEXT_VAR = "nats_server_insecure_plaintext"
# the user route connections authenticate as (the password is the cluster's secret)
ROUTE_USER = "route"

# What a SIGHUP can change (server/reload.go). Everything else in the
# config needs a restart. A key is reloadable when listed here; a block is
# reloadable except for the sub-keys not listed under it.
_RELOADABLE_TOP = {
    "debug", "trace", "trace_verbose", "logtime", "logtime_utc", "log_file",
    "syslog", "remote_syslog", "max_traced_msg_len", "tls", "authorization",
    "accounts", "server_tags", "max_connections", "max_payload",
    "max_control_line", "ping_interval", "ping_max", "write_deadline",
    "client_advertise", "pid_file", "ports_file_dir", "connect_error_reports",
    "reconnect_error_reports",
}
_RELOADABLE_IN_BLOCK = {
    "cluster": {"name", "routes", "permissions", "authorization", "tls",
                "advertise", "no_advertise", "pool_size", "accounts", "compression"},
    "leafnodes": {"tls", "compression", "handshake_first"},
    "mqtt": {"ack_wait", "max_ack_pending", "stream_replicas", "consumer_replicas",
             "consumer_memory_storage", "consumer_inactive_threshold", "tls"},
    "websocket": {"tls"},
    "gateway": {"tls"},
}
# A gateway's tls (its own and each remote gateway's) reloads for its certificate, key, CA and verification
# (the tls.Config), not for these, nor when it comes or goes (the handshake and auth timeouts change with it):
# server/reload.go compares the rest of the gateway options, and refuses a reload that changes them.
_RESTART_IN_GATEWAY_TLS = ("timeout", "verify_and_map", "verify_cert_and_check_known_urls")

_LISTENERS = (
    ("client", ("listen",), "nats_server_port"),
    ("monitoring", ("http",), "nats_server_http_port"),
    ("monitoring", ("https",), "nats_server_http_port"),
    ("cluster", ("cluster", "listen"), "nats_server_cluster_port"),
    ("leafnodes", ("leafnodes", "listen"), "nats_server_leafnodes_port"),
    ("gateway", ("gateway", "listen"), "nats_server_gateway.port"),
    ("mqtt", ("mqtt", "listen"), "nats_server_mqtt"),
    ("websocket", ("websocket", "listen"), "nats_server_websocket"),
)


class ConfigError(NatsEdgeError, ValueError):
    """A setting that cannot become a valid nats-server config."""


# --------------------------------------------------------------------------
# values


def parse_version(value):
    """'v2.10.22', 'nats-server: v2.9.10', '2.11.0-RC.1' -> (2, 10, 22)."""
    version = _versions.parse_version(value)
    if version is None:
        raise ConfigError("cannot read a nats-server version from %r" % (value,))
    return version


def parse_size(value, field="size"):
    """Bytes from an int or a nats-style size string ('512MB', '1G', '2GiB')."""
    try:
        return _units.size_bytes(value)
    except ValueError as exc:
        raise ConfigError("%s: %s" % (field, exc))


def check_duration(value, field="duration"):
    """Durations must be strings like '2m' or '1h30m' (an unquoted 2m is read as 2 MB)."""
    if not isinstance(value, str) or not _DURATION_RE.match(value):
        raise ConfigError("%s: %r is not a duration; use a string such as '30s', '2m' or '1h30m'" % (field, value))
    return value


def parse_timestamp(value):
    """Seconds since the epoch from an RFC 3339 time as /varz reports it
    (nanoseconds and any UTC offset allowed)."""
    try:
        return _units.epoch_seconds(value)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def duration_seconds(value, field="duration"):
    """Seconds in a Go duration string ('2m', '1h30m', '500ms')."""
    check_duration(value, field)
    return _units.duration_ns(value) / 1e9


# nats-server refuses a shorter lame duck duration at startup ("minimum is 30
# seconds"); measured on 2.9.10, 2.10.26, 2.11.x, 2.12.x and 2.15.1 alike.
LAME_DUCK_MIN_SECONDS = 30


def check_lame_duck_duration(value, field="nats_server_lame_duck_duration"):
    """A lame duck duration the server accepts, refused here before a config
    it would not start with reaches a host."""
    if duration_seconds(value, field) < LAME_DUCK_MIN_SECONDS:
        raise ConfigError("%s: %r is below %ds, the shortest lame duck mode nats-server accepts (2.9.10 to 2.15 "
                          "refuse to start with it)" % (field, value, LAME_DUCK_MIN_SECONDS))
    return value


def upstream_arch(ansible_architecture):
    arch = ARCHITECTURES.get(str(ansible_architecture).lower())
    if arch is None:
        raise ConfigError(
            "no upstream nats-server build for architecture %r (known: %s)"
            % (ansible_architecture, ", ".join(sorted(set(ARCHITECTURES))))
        )
    return arch


def deep_merge(base, extra):
    """Merge ``extra`` into a copy of ``base``: dicts merge, anything else
    replaces, and ``None`` removes the key (so every option can be unset)."""
    result = copy.deepcopy(base)
    for key, value in (extra or {}).items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


# --------------------------------------------------------------------------
# resources


def resource_profile(memtotal_mb, mounts, store_dir, memory_limit="auto", max_memory_store="auto",
                     max_file_store="auto", memory_limit_percent=60, memory_store_percent=25,
                     file_store_percent=50):
    """Memory and disk limits for this host: explicit values win, ``auto``
    derives them from the host's RAM and the size of the filesystem holding
    the store, empty/0 leaves the server's own default.

    Stable across runs on purpose: it reads total sizes, never free space.
    """
    memory_bytes = int(memtotal_mb or 0) * 1024 * 1024

    def pick(value, field, percent, total):
        if value in (None, "", 0, "0", "off", "none"):
            return None
        if value == "auto":
            if not total:
                return None
            # whole MiB, so a rounding wobble never changes the config
            return (total * int(percent) // 100) // (1024 * 1024) * (1024 * 1024)
        return parse_size(value, field)

    filesystem = _filesystem_of(mounts or [], store_dir)
    profile = {
        "gomemlimit": pick(memory_limit, "nats_server_memory_limit", memory_limit_percent, memory_bytes),
        "max_memory_store": pick(max_memory_store, "nats_server_jetstream_max_memory_store",
                                 memory_store_percent, memory_bytes),
        "max_file_store": pick(max_file_store, "nats_server_jetstream_max_file_store",
                               file_store_percent, (filesystem or {}).get("size_total")),
    }
    profile["gomemlimit_env"] = _go_size(profile["gomemlimit"]) if profile["gomemlimit"] else ""
    return profile


def _filesystem_of(mounts, path):
    best = None
    for mount in mounts:
        point = mount.get("mount", "")
        prefix = point.rstrip("/") + "/"
        if (path == point or path.startswith(prefix) or point == "/") and mount.get("size_total"):
            if best is None or len(point) > len(best["mount"]):
                best = mount
    return best


def _go_size(value):
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value % size == 0:
            return "%d%s" % (value // size, unit)
    return "%dB" % value


# --------------------------------------------------------------------------
# peers


def peer_urls(members, hostvars, scheme, port_var, default_port, self_name=None):
    """URLs of the members of an inventory group, each at its own advertised
    address and port. Falls back from ``nats_server_advertise_host`` to the
    default IPv4 fact, ``ansible_host`` and finally the inventory name."""
    urls = []
    for name in members or []:
        if name == self_name:
            continue
        hv = hostvars[name] if name in hostvars else {}
        address = (
            hv.get("nats_server_advertise_host")
            or (hv.get("ansible_default_ipv4") or {}).get("address")
            or hv.get("ansible_host")
            or name
        )
        port = _hostvar(hv, port_var) or default_port
        if ":" in str(address) and not str(address).startswith("["):
            address = "[%s]" % address
        urls.append("%s://%s:%s" % (scheme, address, port))
    return urls


# The nats_server role's defaults for what monitor_endpoint reads (a unit test holds them to the role's).
MONITOR_DEFAULTS = {
    "nats_server_http_host": "127.0.0.1",
    "nats_server_http_port": 8222,
    "nats_server_http_tls": False,
    "nats_server_config_dir": "/etc/nats-server",
    "nats_server_tls_ca_file": "",
    "nats_server_tls_ca_src": "",
}
_WILDCARDS = ("0.0.0.0", "::", "")


def monitor_endpoint(variables):
    """Where a server's monitoring port is read on its own host, and the CA its certificate is verified
    against there (empty over http): ``{url, ca}`` from the host's ``nats_server_*`` variables, the role's
    defaults for those not set. A wildcard listener is read at 127.0.0.1; over https the CA is
    ``nats_server_tls_ca_file``, else the bundle the role pushes from ``nats_server_tls_ca_src``."""
    v = dict(MONITOR_DEFAULTS)
    for key in MONITOR_DEFAULTS:
        if hasattr(variables, "get") and variables.get(key) is not None:
            v[key] = variables.get(key)
    host = str(v["nats_server_http_host"]).strip()
    host = "127.0.0.1" if host in _WILDCARDS else host
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    try:
        port = int(v["nats_server_http_port"])
    except (TypeError, ValueError):
        raise ConfigError("nats_server_http_port: %r is not a port" % (v["nats_server_http_port"],))
    tls = _truthy(v["nats_server_http_tls"], "nats_server_http_tls")
    ca = ""
    if tls:
        ca = str(v["nats_server_tls_ca_file"] or "") or (
            "%s/tls/ca.pem" % str(v["nats_server_config_dir"]).rstrip("/") if v["nats_server_tls_ca_src"] else "")
    return {"url": "%s://%s:%d" % ("https" if tls else "http", host, port), "ca": ca}


def _truthy(value, field):
    """Ansible's booleans (an empty value is false), or a ConfigError naming ``field``."""
    from ansible.module_utils.parsing.convert_bool import boolean

    try:
        return boolean(value if value != "" else False, strict=True)
    except TypeError:
        raise ConfigError("%s: %r is not a boolean" % (field, value))


def _hostvar(hv, name):
    """A host's variable, or a key inside one (``nats_server_gateway.port``); None when it is not set."""
    node = hv
    for key in name.split("."):
        if not hasattr(node, "get"):
            return None
        node = node.get(key)
    return node


# --------------------------------------------------------------------------
# the config model


def _advertise(value, port, var):
    """``host:port`` that other servers are told to connect to: a bare host gets the
    listener's port, a bare IPv6 address its brackets."""
    value = str(value).strip()
    if value.startswith("["):
        match = re.match(r"^\[([0-9A-Fa-f:.]+)\](?::(\d+))?$", value)
    elif value.count(":") > 1:
        match = re.match(r"^([0-9A-Fa-f:.]+)()$", value)
    else:
        match = re.match(r"^([^\s:/\[\]]+)(?::(\d+))?$", value)
    if not match:
        raise ConfigError("%s: %r is not a host or host:port" % (var, value))
    host, given = match.group(1), match.group(2)
    if given:
        if not 0 < int(given) < 65536:
            raise ConfigError("%s: %r has no valid port" % (var, value))
        port = int(given)
    return "%s:%d" % ("[%s]" % host if ":" in host else host, port)


def build_config(s):
    """The config model from the role's settings (a dict of its variables
    without the ``nats_server_`` prefix, plus resolved peers and profile)."""
    conf = {"server_name": _required(s, "name")}
    conf["listen"] = "%s:%d" % (s.get("listen_host") or "0.0.0.0", _port(s, "port"))
    plaintext = plaintext_listeners(s)
    if "client" not in plaintext:
        conf["tls"] = _tls(s, "client", verify=bool(s.get("tls_verify_clients")))
        if s.get("tls_allow_non_tls"):
            # moving a running fleet's clients to TLS: both on the client port until they all verify
            conf["allow_non_tls"] = True
    first = client_handshake_first(s.get("client_tls_handshake_first"))
    if first is not None:
        if "client" in plaintext:
            raise ConfigError("%s: the client listener runs in plaintext ('client' is listed in %s), and the TLS "
                              "handshake first needs TLS on it" % (CLIENT_HANDSHAKE_FIRST_VAR, PLAINTEXT_VAR))
        if first is True and s.get("tls_allow_non_tls"):
            raise ConfigError("%s: true makes every client start with the TLS handshake, which overrides "
                              "nats_server_tls_allow_non_tls (its plaintext clients could not connect); give a "
                              "fallback delay instead (such as '300ms', or auto), after which a client that did not "
                              "start TLS gets the INFO" % CLIENT_HANDSHAKE_FIRST_VAR)
        conf["tls"]["handshake_first"] = first
    if s.get("http_port"):
        # https: nats-server serves monitoring with the client listener's certificate (the top-level tls block)
        if s.get("http_tls") and "client" in plaintext:
            raise ConfigError("nats_server_http_tls: nats-server serves monitoring over https with the client "
                              "listener's TLS settings, and 'client' is listed in %s; run the client listener "
                              "with TLS, or monitoring over http" % PLAINTEXT_VAR)
        conf["https" if s.get("http_tls") else "http"] = "%s:%d" % (s.get("http_host") or "127.0.0.1",
                                                                    _port(s, "http_port"))
    if s.get("server_tags"):
        conf["server_tags"] = sorted(str(tag) for tag in s["server_tags"])
    for key in ("max_payload", "max_connections"):
        if s.get(key) not in (None, ""):
            conf[key] = parse_size(s[key], "nats_server_" + key) if key == "max_payload" else int(s[key])
    if s.get("lame_duck_duration"):
        conf["lame_duck_duration"] = check_lame_duck_duration(s["lame_duck_duration"])
    if s.get("lame_duck_grace_period"):
        conf["lame_duck_grace_period"] = check_duration(
            s["lame_duck_grace_period"], "nats_server_lame_duck_grace_period")
    if s.get("debug"):
        conf["debug"] = True
    if s.get("trace"):
        conf["trace"] = True

    if s.get("jetstream_enabled", True):
        conf["jetstream"] = _jetstream(s)
    flags = feature_flags(s.get("feature_flags"))
    if flags:
        conf["feature_flags"] = flags

    if s.get("cluster_group") or s.get("cluster_routes"):
        cluster = {
            "name": _required(s, "cluster_name"),
            "listen": "%s:%d" % (s.get("listen_host") or "0.0.0.0", _port(s, "cluster_port")),
        }
        routes = []
        if s.get("cluster_group"):
            routes = peer_urls(_group(s, "cluster_group", s["cluster_group"]), s.get("hostvars") or {},
                               "nats-route", "nats_server_cluster_port", _port(s, "cluster_port"),
                               s.get("inventory_hostname"))
        routes += [r for r in s.get("cluster_routes") or [] if r not in routes]
        if s.get("cluster_advertise"):
            # gossiped to the other servers, which open their implicit routes to it: an address there would
            # stop verifying against the certificate once the host's address changes (a restart, a new lease)
            cluster["advertise"] = _advertise(s["cluster_advertise"], _port(s, "cluster_port"),
                                              "nats_server_cluster_advertise")
        if "cluster" not in plaintext:
            cluster["tls"] = _tls(s, "cluster", verify=True, ca_required=True)
        user, password = _route_credentials(s)
        cluster["authorization"] = {"user": user, "password": password}
        routes = [_with_credentials(route, user, password) for route in routes]
        if routes:
            cluster["routes"] = routes
        conf["cluster"] = cluster

    leafnodes = {}
    if s.get("leafnodes_port"):
        leafnodes["listen"] = "%s:%d" % (s.get("listen_host") or "0.0.0.0", _port(s, "leafnodes_port"))
        if s.get("leafnodes_advertise"):
            leafnodes["advertise"] = _advertise(s["leafnodes_advertise"], _port(s, "leafnodes_port"),
                                                "nats_server_leafnodes_advertise")
        if "leafnodes" not in plaintext:
            leafnodes["tls"] = _tls(s, "leafnodes", verify=bool(s.get("leafnodes_tls_verify")),
                                    ca_required=bool(s.get("leafnodes_tls_verify")))
            if s.get("tls_handshake_first"):
                leafnodes["tls"]["handshake_first"] = True
    remotes = [_remote(s, remote, i, plaintext) for i, remote in enumerate(s.get("leafnode_remotes") or [])]
    if remotes:
        leafnodes["remotes"] = remotes
    if leafnodes:
        conf["leafnodes"] = leafnodes

    if s.get("operator_jwt"):
        if s.get("accounts"):
            raise ConfigError("nats_server_accounts cannot be used in operator mode (nats_server_operator_jwt_src): "
                              "accounts come from the resolver")
        conf["operator"] = s["operator_jwt"]
        conf["resolver"] = _resolver(s)
        if s.get("resolver_preload"):
            conf["resolver_preload"] = dict(sorted(s["resolver_preload"].items()))
    if s.get("accounts"):
        conf["accounts"] = copy.deepcopy(s["accounts"])
    if s.get("system_account"):
        conf["system_account"] = s["system_account"]
    if s.get("no_auth_user"):
        conf["no_auth_user"] = s["no_auth_user"]
    if s.get("authorization"):
        conf["authorization"] = copy.deepcopy(s["authorization"])
    if not (conf.get("operator") or _has_users(conf.get("accounts")) or conf.get("authorization")
            or s.get("allow_anonymous")):
        raise ConfigError("nats_server_operator_jwt_src: clients would connect without authenticating; run in "
                          "operator mode (site.yml does), give users in nats_server_accounts or "
                          "nats_server_authorization, or set nats_server_allow_anonymous: true")
    for block in ("mqtt", "websocket"):
        if s.get(block):
            conf[block] = _web_listener(s, block, plaintext)
    extra = dict(s.get("extra_config") or {})
    gateway = _gateway(s, extra.pop("gateway", {}), plaintext)
    if gateway:
        conf["gateway"] = gateway

    return deep_merge(conf, extra)


def _has_users(accounts):
    """Whether any static account has a user or an nkey to authenticate as."""
    return any(isinstance(account, dict) and (account.get("users") or account.get("nkeys"))
               for account in (accounts or {}).values())


def plaintext_listeners(s):
    """The listeners the user runs without TLS (``nats_server_insecure_plaintext``: names from
    TLS_LISTENERS, or ``all``)."""
    value = s.get("insecure_plaintext") or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ConfigError("%s: expected a list of listeners (%s, or all), got %r"
                          % (PLAINTEXT_VAR, ", ".join(TLS_LISTENERS), value))
    names = set(str(v) for v in value)
    unknown = sorted(names - set(TLS_LISTENERS) - {"all"})
    if unknown:
        raise ConfigError("%s: unknown listener(s) %s (known: %s, all)"
                          % (PLAINTEXT_VAR, ", ".join(unknown), ", ".join(TLS_LISTENERS)))
    return set(TLS_LISTENERS) if "all" in names else names


def _tls(s, listener, verify=False, ca_required=False):
    """A listener's tls block from the host's certificate, key and CA (nats_server_tls_*_file)."""
    missing = [name for name in ("cert_file", "key_file") if not s.get("tls_" + name)]
    if ca_required and not s.get("tls_ca_file"):
        missing.append("ca_file")
    if missing:
        names = {"cert_file": "certificate", "key_file": "key", "ca_file": "CA"}
        raise ConfigError(
            "nats_server_tls_%s: the %s listener runs TLS%s, and no %s is given: set the certificate, key and CA "
            "(nats_server_tls_cert_src, _key_src and _ca_src from the controller, or nats_server_tls_cert_file, "
            "_key_file and _ca_file already on the host; site.yml issues them from the fleet CA), or list %r in "
            "%s to run it in plaintext"
            % (missing[0], listener, " verifying its peers against the CA" if ca_required else "",
               " or ".join(names[m] for m in missing), listener, PLAINTEXT_VAR))
    block = {"cert_file": s["tls_cert_file"], "key_file": s["tls_key_file"]}
    if s.get("tls_ca_file"):
        block["ca_file"] = s["tls_ca_file"]
    if verify:
        block["verify"] = True
    timeout = _tls_timeout(s)
    if timeout:
        block["timeout"] = timeout
    return block


def client_handshake_first(value):
    """The client tls block's ``handshake_first`` from ``nats_server_client_tls_handshake_first``: None (left out) for
    false, True (every client starts with the TLS handshake), or a fallback delay - a duration such as '300ms', or
    'auto' (nats-server's 50ms) - after which a client that sent nothing gets the INFO in plaintext first, as before
    (server/opts.go parseTLS)."""
    if value in (None, "", False):
        return None
    if value is True:
        return True
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("auto", "auto_fallback"):
            return "auto"
        if _DURATION_RE.match(text):
            if _units.duration_ns(text) <= 0:
                raise ConfigError("%s: %r is no fallback delay; set true for the TLS handshake first without one"
                                  % (CLIENT_HANDSHAKE_FIRST_VAR, value))
            return text
        try:
            return True if _truthy(text, CLIENT_HANDSHAKE_FIRST_VAR) else None
        except ConfigError:
            pass
    raise ConfigError("%s: %r is not true, false, auto or a fallback delay (a duration such as '300ms')"
                      % (CLIENT_HANDSHAKE_FIRST_VAR, value))


def _tls_timeout(s):
    """Seconds a TLS handshake may take (nats_server_tls_timeout), or None for the server's default."""
    value = s.get("tls_timeout")
    if value in (None, "", 0):
        return None
    try:
        timeout = float(value)
    except (TypeError, ValueError):
        timeout = -1
    if timeout <= 0:
        raise ConfigError("nats_server_tls_timeout: %r is not a positive number of seconds" % (value,))
    return timeout


def _route_credentials(s):
    """The cluster's route user and password; every clustered server needs them."""
    return _link_credentials(s, "cluster", ROUTE_USER, "routes of cluster %s" % s.get("cluster_name"),
                             "shared by the cluster's servers")


def _gateway_credentials(s, name):
    """The gateways' user and password; every gateway of the super-cluster needs them."""
    return _link_credentials(s, "gateway", GATEWAY_USER, "gateways of cluster %s" % name,
                             "shared by every cluster's gateways")


def _link_credentials(s, prefix, default_user, what, shared):
    """(user, password) that links between servers authenticate with: ``<prefix>_user`` and ``<prefix>_password``
    (16 characters or more)."""
    password, user = s.get(prefix + "_password"), s.get(prefix + "_user")
    for field, value in (("password", password), ("user", user)):
        if isinstance(value, (dict, list, tuple, set, bool)):
            raise ConfigError("nats_server_%s_%s: expected a string, got %s" % (prefix, field, type(value).__name__))
    if password in (None, ""):
        raise ConfigError("nats_server_%s_password: the %s must authenticate; set a password %s (the role "
                          "generates one on the controller by default)" % (prefix, what, shared))
    password = str(password)
    if len(password) < 16:
        raise ConfigError("nats_server_%s_password: the %s need a password of at least 16 characters"
                          % (prefix, what))
    return str(user or default_user), password


def _with_credentials(url, user, password, where="nats_server_cluster_routes", scheme="nats-route"):
    """A URL that authenticates: ``nats-route://user:password@host:port`` (a URL that names its own user is
    kept)."""
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)$", str(url))
    if not match:
        raise ConfigError("%s: %r is not a URL (%s://host:port)" % (where, url, scheme))
    if "@" in match.group(2):
        return url
    return "%s%s:%s@%s" % (match.group(1), quote(user, safe=""), quote(password, safe=""), match.group(2))


def _web_listener(s, block, plaintext):
    """The websocket or mqtt block, with the host's certificate unless it runs in plaintext."""
    conf = copy.deepcopy(s[block])
    if block in plaintext:
        if block == "websocket" and "tls" not in conf:
            conf["no_tls"] = True
        return conf
    if conf.get("no_tls"):
        raise ConfigError("nats_server_%s.no_tls: the %s listener runs TLS by default; list %r in %s to run it "
                          "in plaintext" % (block, block, block, PLAINTEXT_VAR))
    if "tls" not in conf:
        conf["tls"] = _tls(s, block)
    return conf


_GATEWAY_REMOTE_KEYS = {"name", "urls", "url", "group", "tls"}
GATEWAY_PORT = 7222
GATEWAY_USER = "gateway"


def _gateway(s, extra, plaintext):
    """The gateway block: ``nats_server_gateway`` with ``nats_server_extra_config.gateway`` merged over it (a null
    one removes the gateway), its listener at the listen host, mutual TLS against the CA unless it runs in
    plaintext, and each remote gateway's URLs (``group``: the members of an inventory group)."""
    if extra is None:
        return None
    for where, value in (("nats_server_gateway", s.get("gateway")), ("nats_server_extra_config.gateway", extra)):
        if value and not isinstance(value, dict):
            raise ConfigError("%s: expected a mapping (the gateway block: name, port, gateways, ...), got %r"
                              % (where, value))
    given = deep_merge(s.get("gateway") or {}, extra or {})
    if not given:
        return None
    name = given.get("name") or s.get("cluster_name")
    if not name:
        raise ConfigError("nats_server_gateway.name must be set (the name of this server's cluster among the "
                          "gateways; it defaults to nats_server_cluster_name)")
    if (s.get("cluster_group") or s.get("cluster_routes")) and str(name) != str(s.get("cluster_name")):
        raise ConfigError("nats_server_gateway.name: %r is not the cluster's name %r; nats-server requires a "
                          "clustered server's gateway to carry its cluster's name" % (name, s.get("cluster_name")))
    port = given.get("port")
    if given.get("listen"):
        port = str(given["listen"]).rsplit(":", 1)[-1]
    elif port in (None, ""):
        raise ConfigError("nats_server_gateway.port must be set (the port other clusters' gateways connect to, "
                          "such as %d)" % GATEWAY_PORT)
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise ConfigError("nats_server_gateway.port: %r is not a port number" % (port,))
    if not 0 < port < 65536:
        raise ConfigError("nats_server_gateway.port: %d is not a port number (1-65535)" % port)
    gateway = {"name": name}
    if given.get("listen") or given.get("host"):
        gateway.update((key, given[key]) for key in ("host", "port", "listen") if key in given)
    else:
        gateway["listen"] = "%s:%d" % (s.get("listen_host") or "0.0.0.0", port)
    if given.get("advertise"):
        gateway["advertise"] = _advertise(given["advertise"], port, "nats_server_gateway.advertise")
    for key, value in given.items():
        if key not in ("name", "host", "port", "listen", "advertise", "tls", "gateways"):
            gateway[key] = copy.deepcopy(value)
    # gateways authenticate with the super-cluster's gateway password (a gateway authorization of the user's own is
    # kept, and then the remotes' URLs are the user's to write)
    credentials = None
    if "authorization" not in given:
        credentials = _gateway_credentials(s, name)
        gateway["authorization"] = {"user": credentials[0], "password": credentials[1]}
    if "gateway" in plaintext:
        if given.get("tls"):
            gateway["tls"] = copy.deepcopy(given["tls"])
    else:
        gateway["tls"] = _tls(s, "gateway", verify=True, ca_required=True)
        gateway["tls"].update(_given_gateway_tls(given.get("tls"), "nats_server_gateway.tls"))
    remotes = given.get("gateways") or []
    if not isinstance(remotes, list):
        raise ConfigError("nats_server_gateway.gateways: expected a list of gateways ({name, urls}), got %r"
                          % (remotes,))
    if remotes:
        gateway["gateways"] = [_gateway_remote(s, remote, index, plaintext, credentials)
                               for index, remote in enumerate(remotes)]
    return gateway


def _given_gateway_tls(given, where):
    """The user's own tls settings for a gateway, merged over the role's; ``insecure`` (the gateways it connects
    to unverified) is refused. (nats-server requires and verifies the certificate of a gateway that connects in,
    whatever ``verify`` says: server/opts.go getTLSConfig.)"""
    given = copy.deepcopy(given or {})
    if not isinstance(given, dict):
        raise ConfigError("%s: expected a mapping, got %r" % (where, given))
    if given.get("insecure"):
        raise ConfigError("%s.insecure: gateways verify each other's certificates against the CA; list 'gateway' in "
                          "%s to run them in plaintext" % (where, PLAINTEXT_VAR))
    return given


def _given_urls(remote, where, known, shape=""):
    """The urls a remote (leaf or gateway) names itself, once it is checked to be a mapping of ``known`` options."""
    if not isinstance(remote, dict):
        raise ConfigError("%s: expected a mapping%s, got %r" % (where, shape, remote))
    unknown = sorted(set(remote) - known)
    if unknown:
        raise ConfigError("%s: unknown option(s) %s (known: %s)" % (where, ", ".join(unknown), ", ".join(sorted(known))))
    return list(remote.get("urls") or ([remote["url"]] if remote.get("url") else []))


def _gateway_remote(s, remote, index, plaintext, credentials):
    where = "nats_server_gateway.gateways[%d]" % index
    urls = _given_urls(remote, where, _GATEWAY_REMOTE_KEYS, " ({name, urls})")
    if not remote.get("name"):
        raise ConfigError("%s: no name (the name of the cluster it connects to)" % where)
    if remote.get("group"):
        members = _group(s, "gateway.gateways[%d].group" % index, remote["group"])
        urls += [url for url in peer_urls(members, s.get("hostvars") or {}, "nats", "nats_server_gateway.port",
                                          GATEWAY_PORT) if url not in urls]
    if not urls:
        raise ConfigError("%s: no urls (set urls, url or group)" % where)
    if credentials:
        urls = [_with_credentials(url, credentials[0], credentials[1], where + ".urls", "nats") for url in urls]
    out = {"name": remote["name"], "urls": urls}
    if remote.get("tls"):
        if "gateway" in plaintext:
            out["tls"] = copy.deepcopy(remote["tls"])
        else:
            # a remote's own tls replaces the gateway's for its connections: the host's certificate and CA under it
            tls = _tls(s, "gateway", ca_required=True)
            tls.update(_given_gateway_tls(remote["tls"], where + ".tls"))
            out["tls"] = tls
    return out


def _jetstream(s):
    js = {"store_dir": _required(s, "jetstream_store_dir")}
    if s.get("jetstream_domain"):
        js["domain"] = s["jetstream_domain"]
    profile = s.get("profile") or {}
    for key in ("max_memory_store", "max_file_store"):
        if profile.get(key):
            js[key] = profile[key]
    if s.get("jetstream_unique_tag"):
        js["unique_tag"] = s["jetstream_unique_tag"]
    if s.get("jetstream_sync_interval"):
        js["sync_interval"] = s["jetstream_sync_interval"]
    return js


def feature_flags(value):
    """The ``feature_flags`` block from ``nats_server_feature_flags`` ({name: true|false}), names sorted; names
    nats-server does not know and values that are not booleans are refused."""
    if value in (None, "", {}):
        return {}
    if not isinstance(value, dict):
        raise ConfigError("%s: expected a mapping of flag names to true or false (such as {js_ack_fc_v2: true}), "
                          "got %r" % (FEATURE_FLAGS_VAR, value))
    flags = {}
    for name in sorted(value, key=str):
        if name not in FEATURE_FLAGS:
            raise ConfigError("%s: unknown feature flag %r (known: %s); nats-server would log it as unsupported and "
                              "run without it" % (FEATURE_FLAGS_VAR, name, ", ".join(
                                  "%s (nats-server %s)" % (flag, _dotted(FEATURE_FLAGS[flag]))
                                  for flag in sorted(FEATURE_FLAGS))))
        if not isinstance(value[name], bool):
            raise ConfigError("%s.%s: %r is not a boolean (true turns the flag on, false keeps it off)"
                              % (FEATURE_FLAGS_VAR, name, value[name]))
        flags[name] = value[name]
    return flags


def _dotted(version):
    return ".".join(str(part) for part in version)


def _resolver(s):
    """The full account resolver by default, stored beside JetStream."""
    resolver = {"type": "full", "dir": "%s/jwt" % str(s.get("jetstream_store_dir") or "/var/lib/nats-server").rstrip("/"),
                "allow_delete": False, "interval": "2m"}
    resolver.update(s.get("resolver") or {})
    if resolver.get("type") not in ("full", "cache"):
        raise ConfigError("nats_server_resolver.type: %r is not a resolver this role runs (full, cache)"
                          % resolver.get("type"))
    if resolver.get("interval"):
        check_duration(resolver["interval"], "nats_server_resolver.interval")
    return resolver


def _remote(s, remote, index, plaintext):
    where = "nats_server_leafnode_remotes[%d]" % index
    urls = _given_urls(remote, where, _REMOTE_KEYS)
    if remote.get("hub_group"):
        hubs = _group(s, "leafnode_remotes[%d].hub_group" % index, remote["hub_group"])
        urls += peer_urls(hubs, s.get("hostvars") or {}, remote.get("scheme", "nats-leaf"),
                          "nats_server_leafnodes_port", remote.get("port", 7422))
    if not urls:
        raise ConfigError("%s: no urls (set urls, url or hub_group)" % where)
    out = {"urls": urls}
    if remote.get("account") and remote["account"] == s.get("system_account") and not remote.get("system_account"):
        raise ConfigError("%s: account %s is the system account; joining system accounts across a leaf "
                          "connection merges the servers' system traffic. Set system_account: true on the "
                          "remote to do it anyway" % (where, remote["account"]))
    if remote.get("account"):
        out["account"] = remote["account"]
    credentials = remote_credentials(s.get("config_dir", "/etc/nats-server"), remote, index)
    if credentials:
        out["credentials"] = credentials
    for key in ("deny_imports", "deny_exports", "compression", "hub", "first_info_timeout"):
        if remote.get(key) not in (None, "", [], {}):
            out[key] = copy.deepcopy(remote[key])
    if remote.get("dial_timeout") not in (None, ""):
        # the TCP connect to each of the remote's URLs (nats-server's default is 1s), for high-latency links
        out["dial_timeout"] = check_duration(remote["dial_timeout"], where + ".dial_timeout")
    websocket = [url for url in urls if str(url).lower().startswith(("ws://", "wss://"))]
    if websocket and len(websocket) < len(urls):
        raise ConfigError("%s: websocket (ws://, wss://) and other urls in one remote; nats-server refuses the mix, "
                          "give each kind a remote of its own" % where)
    for key in _REMOTE_FLAGS:
        if remote.get(key) in (None, ""):
            continue
        if not isinstance(remote[key], bool):
            raise ConfigError("%s.%s: %r is not a boolean" % (where, key, remote[key]))
        if key.startswith("ws_") and remote[key] and not websocket:
            raise ConfigError("%s.%s: applies to websocket connections, and none of the remote's urls is a ws:// or "
                              "wss:// URL" % (where, key))
        if remote[key]:
            out[key] = True
    if remote.get("proxy") not in (None, "", {}):
        out["proxy"] = _remote_proxy(remote["proxy"], where + ".proxy", urls, websocket)
    tls = _remote_tls(s, remote, plaintext)
    if tls:
        out["tls"] = tls
    return out


_PROXY_KEYS = ("url", "username", "password", "timeout")


def _remote_proxy(proxy, where, urls, websocket):
    """A remote's HTTP CONNECT proxy: ``url`` (http:// or https://), ``username`` with ``password``, ``timeout``.
    nats-server dials only websocket URLs through it, so a remote with another URL is refused."""
    if not isinstance(proxy, dict):
        raise ConfigError("%s: expected a mapping ({url, username, password, timeout}), got %r" % (where, proxy))
    unknown = sorted(set(proxy) - set(_PROXY_KEYS))
    if unknown:
        raise ConfigError("%s: unknown option(s) %s (known: %s)" % (where, ", ".join(unknown), ", ".join(_PROXY_KEYS)))
    url = str(proxy.get("url") or "")
    if not re.match(r"^https?://[^/\s]+", url):
        raise ConfigError("%s.url: %r is not an http:// or https:// URL of a proxy" % (where, url))
    others = [u for u in urls if u not in websocket]
    if others:
        raise ConfigError("%s: nats-server sends only websocket connections through a proxy, and %s is not a ws:// "
                          "or wss:// URL" % (where, _redacted(others[0])))
    if bool(proxy.get("username")) != bool(proxy.get("password")):
        raise ConfigError("%s: username and password go together (set both, or neither)" % where)
    out = {"url": url}
    for key in ("username", "password"):
        if proxy.get(key):
            out[key] = str(proxy[key])
    if proxy.get("timeout") not in (None, ""):
        out["timeout"] = check_duration(proxy["timeout"], where + ".timeout")
    return out


def _redacted(url):
    return re.sub(r"//[^@/]*@", "//***@", str(url))


def _remote_tls(s, remote, plaintext):
    """A remote's tls: the hub verified against the host's CA (the system's roots without one), this
    server's own certificate presented, and the remote's own ``tls`` merged over that."""
    given = remote.get("tls") or {}
    if "leafnodes" in plaintext:
        return copy.deepcopy(given)
    tls = {}
    if s.get("tls_ca_file"):
        tls["ca_file"] = s["tls_ca_file"]
    if s.get("tls_cert_file") and s.get("tls_key_file"):
        tls["cert_file"] = s["tls_cert_file"]
        tls["key_file"] = s["tls_key_file"]
    timeout = _tls_timeout(s)
    if timeout:
        tls["timeout"] = timeout
    if s.get("tls_handshake_first"):
        tls["handshake_first"] = True
    if given.get("insecure"):
        raise ConfigError("leaf remote tls.insecure: the hub's certificate is always verified; list 'leafnodes' "
                          "in %s to run leaf links in plaintext" % PLAINTEXT_VAR)
    tls.update(copy.deepcopy(given))
    return tls


# the remote's options that are true or left out
_REMOTE_FLAGS = ("disabled", "ignore_discovered_servers", "isolate_leafnode_interest", "request_isolation",
                 "ws_compression", "ws_no_masking")
_REMOTE_KEYS = {"urls", "url", "hub_group", "scheme", "port", "account", "credentials", "credentials_src",
                "system_account", "proxy",
                "tls", "deny_imports", "deny_exports", "compression", "hub", "first_info_timeout",
                "dial_timeout"} | set(_REMOTE_FLAGS)


def remote_credentials(config_dir, remote, index):
    """Where a remote's credentials live on the host: as given, or the
    file the role pushes from ``credentials_src``."""
    if remote.get("credentials_src"):
        return "%s/creds/%s.creds" % (config_dir.rstrip("/"), remote.get("account") or "remote-%d" % index)
    return remote.get("credentials") or None


def _group(s, field, name):
    groups = s.get("groups") or {}
    if name not in groups:
        raise ConfigError("nats_server_%s: group %r is not in the inventory" % (field, name))
    return groups[name]


def _required(s, key):
    if s.get(key) in (None, ""):
        raise ConfigError("nats_server_%s must be set" % key)
    return s[key]


def _port(s, key):
    value = s.get(key)
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ConfigError("nats_server_%s: %r is not a port number" % (key, value))
    if not 0 < port < 65536:
        raise ConfigError("nats_server_%s: %d is not a port number (1-65535)" % (key, port))
    return port


# --------------------------------------------------------------------------
# checks on the model


def listener_conflicts(conf):
    """Messages for listeners that share a port on this host."""
    seen = {}
    problems = []
    for name, path, variable in _LISTENERS:
        value = _get(conf, path)
        if value is None and len(path) == 2 and isinstance(conf.get(path[0]), dict):
            port = conf[path[0]].get("port")
            value = ":%s" % port if port else None
        if not value:
            continue
        port = str(value).rsplit(":", 1)[-1]
        if port in seen:
            first = seen[port]
            problems.append(
                "port %s is used by both the %s listener (%s) and the %s listener (%s)"
                % (port, first[0], first[1], name, variable)
            )
        else:
            seen[port] = (name, variable)
    return problems


def prune_for_version(conf, version):
    """Drop options the given server version does not know. Returns the
    pruned config and the dotted paths that were dropped."""
    version = parse_version(version) if not isinstance(version, tuple) else version
    _refuse_for_version(conf, version)
    conf = copy.deepcopy(conf)
    dropped = []
    for path, minimum in sorted(MIN_VERSIONS.items()):
        if version < minimum:
            _drop(conf, list(path), [], dropped, minimum)
    return conf, dropped


def version_problems(conf, version):
    """Messages for the leaf remote options (REFUSED_BELOW) and the options of REFUSED_PATHS set for a server too old
    for them; none when the version cannot be read (the config is checked again for the version installed)."""
    if not isinstance(version, tuple):
        version = _versions.parse_version(version) if version else None
    if version is None:
        return []
    problems = []
    for path, (variable, otherwise) in sorted(REFUSED_PATHS.items()):
        minimum = MIN_VERSIONS[path]
        if _get(conf, path) not in (None, False) and version < minimum:
            problems.append("%s needs nats-server %s or later, and this host runs %s; without it %s, so the config "
                            "is not written (upgrade the server, or remove the option)"
                            % (variable, _dotted(minimum), _dotted(version), otherwise))
    remotes = _get(conf, ("leafnodes", "remotes")) or []
    for index, remote in enumerate(remotes):
        for key in sorted(REFUSED_BELOW):
            minimum = MIN_VERSIONS[("leafnodes", "remotes", "*", key)]
            if isinstance(remote, dict) and remote.get(key) not in (None, False, {}) and version < minimum:
                problems.append("nats_server_leafnode_remotes[%d].%s needs nats-server %s or later, and this host "
                                "runs %s; without it the remote would behave otherwise, so the config is not "
                                "written (upgrade the server, or remove the option)"
                                % (index, key, _dotted(minimum), _dotted(version)))
    return problems


def _refuse_for_version(conf, version):
    """A ConfigError for a leaf remote option (REFUSED_BELOW) set on a server too old for it."""
    problems = version_problems(conf, version)
    if problems:
        raise ConfigError("; ".join(problems))


def _drop(node, path, trail, dropped, minimum):
    head = path[0]
    if head == "*":
        if isinstance(node, list):
            for i, item in enumerate(node):
                _drop(item, path[1:], trail + [str(i)], dropped, minimum)
        return
    if not isinstance(node, dict) or head not in node:
        return
    if len(path) == 1:
        del node[head]
        dropped.append("%s (needs nats-server %s)" % (".".join(trail + [head]), ".".join(map(str, minimum))))
    else:
        _drop(node[head], path[1:], trail + [head], dropped, minimum)


def restart_fingerprint(conf, version=None):
    """The part of the config a reload cannot change. If it differs between
    the running and the new config, the server must restart (but see
    fingerprint_needs_restart: from 2.14.0 the leaf remotes are a mapping,
    whose added and removed entries a reload takes)."""
    version = parse_version(version) if isinstance(version, str) and version else version
    fingerprint = {}
    for key, value in conf.items():
        if key in _RELOADABLE_TOP:
            continue
        if key in _RELOADABLE_IN_BLOCK and isinstance(value, dict):
            fixed = {k: v for k, v in value.items() if k not in _RELOADABLE_IN_BLOCK[key]}
            if key == "gateway":
                fixed = _gateway_fingerprint(value)
            if key == "leafnodes":
                # TLS coming or going, or its handshake timeout (which sets the auth timeout), on the listener or
                # on a remote: a reload refuses it (2.9.10 refuses any listener tls, 2.15 one with a timeout);
                # its certificate, key and CA files reload
                if isinstance(value.get("tls"), dict):
                    fixed["tls"] = {"timeout": value["tls"].get("timeout")}
                if "remotes" in fixed:
                    # the server matches remotes ignoring the rest of these; changing them reloads
                    fixed["remotes"] = [_remote_fingerprint(r) for r in fixed["remotes"]]
                    if version and version >= RELOAD_REMOTES_SINCE:
                        fixed["remotes"] = {_remote_identity(r): r for r in fixed["remotes"]}
            fingerprint[key] = fixed
        else:
            fingerprint[key] = value
    return fingerprint


def _remote_fingerprint(remote):
    """What of a leaf remote a reload cannot change: all but its tls (of which only the handshake timeout counts),
    compression and disabled."""
    fixed = {k: v for k, v in remote.items() if k not in _RELOADABLE_IN_REMOTE}
    if isinstance(remote.get("tls"), dict):
        fixed["tls"] = {"timeout": remote["tls"].get("timeout")}
    return fixed


def _remote_identity(remote):
    """What nats-server tells leaf remotes apart by on a reload (RemoteLeafOpts.name: the URLs, the local account and
    the credentials file), as a short digest: the URLs may carry a password."""
    import hashlib

    key = json.dumps([remote.get("urls"), remote.get("account") or "$G", remote.get("credentials") or ""])
    return "remote-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def fingerprint_needs_restart(previous, new):
    """Whether the server must restart to go from the fingerprint ``previous`` to ``new`` (JSON text or data): when
    they differ, except where the only difference is leaf remotes added or removed on a server that reloads them
    (restart_fingerprint renders those as a mapping). An unreadable or missing previous fingerprint restarts."""
    try:
        old = json.loads(previous) if isinstance(previous, (str, bytes)) else previous
        new = json.loads(new) if isinstance(new, (str, bytes)) else new
    except ValueError:
        return True
    if not isinstance(old, dict) or not isinstance(new, dict):
        return True
    if old == new:
        return False

    def remotes(fingerprint):
        leafnodes = fingerprint.get("leafnodes", {})
        return leafnodes.get("remotes", {}) if isinstance(leafnodes, dict) else None

    def without_remotes(fingerprint):
        rest = copy.deepcopy(fingerprint)
        leafnodes = rest.pop("leafnodes", {})
        leafnodes.pop("remotes", None)
        if leafnodes:
            rest["leafnodes"] = leafnodes
        return rest

    old_remotes, new_remotes = remotes(old), remotes(new)
    if isinstance(old_remotes, list) and isinstance(new_remotes, dict):
        # recorded before the server reloaded remotes (or by an older role): matched the way the server matches them
        old_remotes = {_remote_identity(r): r for r in old_remotes if isinstance(r, dict)}
    # no remotes on either side says nothing of the version: a mapping on the other side decides
    if not (old_remotes or new_remotes) or not isinstance(old_remotes, dict) or not isinstance(new_remotes, dict):
        return True
    if without_remotes(old) != without_remotes(new):
        return True
    return any(old_remotes[key] != new_remotes[key] for key in set(old_remotes) & set(new_remotes))


def _gateway_fingerprint(gateway):
    """What of a gateway block a reload cannot change: all of it but its tls and its remotes' tls, of which only
    whether there is one and the restart-only keys count."""

    def tls_fixed(tls):
        return {k: v for k, v in tls.items() if k in _RESTART_IN_GATEWAY_TLS} if isinstance(tls, dict) else tls

    fixed = copy.deepcopy(gateway)
    if "tls" in fixed:
        fixed["tls"] = tls_fixed(fixed["tls"])
    for remote in fixed.get("gateways") or []:
        if isinstance(remote, dict) and "tls" in remote:
            remote["tls"] = tls_fixed(remote["tls"])
    return fixed


def _get(conf, path):
    node = conf
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


# --------------------------------------------------------------------------
# rendering


_BARE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def render(conf, header=None):
    """nats-server config text. Strings are always quoted (so durations and
    names are never misread as sizes or variables); keys are stable."""
    lines = []
    if header:
        lines.extend("# " + line if line else "#" for line in header.splitlines())
        lines.append("")
    for key, value in conf.items():
        lines.extend(_render_entry(key, value, 0))
    return "\n".join(lines) + "\n"


def _render_entry(key, value, depth):
    pad = "  " * depth
    name = key if _BARE_KEY.match(str(key)) else json.dumps(str(key))
    if isinstance(value, dict):
        if not value:
            return ["%s%s {}" % (pad, name)]
        out = ["%s%s {" % (pad, name)]
        for k, v in value.items():
            out.extend(_render_entry(k, v, depth + 1))
        out.append("%s}" % pad)
        return out
    if isinstance(value, list):
        if not value:
            return ["%s%s: []" % (pad, name)]
        out = ["%s%s: [" % (pad, name)]
        for item in value:
            out.extend(_render_item(item, depth + 1))
        out.append("%s]" % pad)
        return out
    return ["%s%s: %s" % (pad, name, _scalar(value))]


def _render_item(item, depth):
    pad = "  " * depth
    if isinstance(item, dict):
        out = ["%s{" % pad]
        for k, v in item.items():
            out.extend(_render_entry(k, v, depth + 1))
        out.append("%s}" % pad)
        return out
    if isinstance(item, list):
        return ["%s%s" % (pad, json.dumps(item))]
    return ["%s%s" % (pad, _scalar(item))]


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if value is None:
        raise ConfigError("a config value is empty (None); remove the key instead")
    return json.dumps(str(value))
