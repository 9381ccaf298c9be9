# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring stage's inputs, checked and planned on the controller. Private to the collection.

``check`` judges the ``nats_monitoring_*`` settings (alert thresholds by the kind their name ends in), the
hosts they name and the per-stream thresholds of the fleet data before anything changes; ``targets`` turns the
inventory and the fleet's files on the controller into what the collector is told: the servers and sites it
expects, the leaf links they should hold, the accounts' names, and when each certificate and creds file
expires.
"""

from __future__ import annotations

import calendar
import os
import re

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt, _units
from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError

# the stream metadata nats CLI's `server check stream` reads its message age threshold from
MSG_AGE_KEY = "io.nats.monitor.msg-age"
# Prometheus durations: units from years to milliseconds, largest first, each at most once
_PROM_DURATION = re.compile(r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
# how a threshold's name says what it holds
_KINDS = (
    ("_for", "duration"), ("_window", "duration"), ("_interval", "duration"), ("_timeout", "duration"),
    ("_retention", "duration"), ("_ratio", "ratio"), ("_days", "count"), ("_messages", "count"),
    ("_seconds", "number"), ("_count", "count"), ("_hold", "duration"), ("_severity", "severity"),
    ("_port", "port"),
)
SEVERITIES = ("critical", "warning", "info")
SETTING_PREFIX = "nats_monitoring_"


class MonitoringError(NatsEdgeError, ValueError):
    """Monitoring input the stage refuses."""


def prometheus_duration(value, field):
    """``value`` when it is a duration Prometheus accepts ('30s', '5m', '1h30m')."""
    if not isinstance(value, str) or not value or not _PROM_DURATION.match(value):
        raise MonitoringError("%s: %r is not a Prometheus duration (such as '30s', '5m' or '1h30m')" % (field, value))
    return value


def _number(value, field, kind):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str) and re.match(r"^\s*\d+(\.\d+)?\s*$", value):
            value = float(value) if "." in value else int(value)
        else:
            raise MonitoringError("%s: %r is not a number" % (field, value))
    if value < 0:
        raise MonitoringError("%s: %r cannot be negative" % (field, value))
    if kind == "ratio" and not 0 < value <= 1:
        raise MonitoringError("%s: %r is not a ratio between 0 (excluded) and 1" % (field, value))
    if kind == "count" and value != int(value):
        raise MonitoringError("%s: %r is not a whole number" % (field, value))
    return value


def check_setting(name, value):
    """A threshold checked by the kind its name ends in; settings of other names pass as they are."""
    for suffix, kind in _KINDS:
        if name.endswith(suffix):
            if kind == "duration":
                return prometheus_duration(value, name)
            if kind == "severity":
                if value not in SEVERITIES:
                    raise MonitoringError("%s: %r is not a severity (%s)" % (name, value, ", ".join(SEVERITIES)))
                return value
            if kind == "port":
                value = _number(value, name, "count")
                if not 0 < value < 65536:
                    raise MonitoringError("%s: %r is not a TCP port" % (name, value))
                return value
            return _number(value, name, kind)
    return value


def stream_age(stream, where):
    """Seconds of a stream's newest-message threshold in the fleet data (its metadata), or None."""
    metadata = stream.get("metadata") or {}
    if not isinstance(metadata, dict) or MSG_AGE_KEY not in metadata:
        return None
    value = metadata[MSG_AGE_KEY]
    field = "%s.metadata[%s]" % (where, MSG_AGE_KEY)
    if not isinstance(value, str):
        raise MonitoringError("%s: %r is not a duration string (such as '5m' or '1h')" % (field, value))
    try:
        seconds = _units.duration_ns(value) / 1e9
    except ValueError as exc:
        raise MonitoringError("%s: %s" % (field, exc)) from None
    if not seconds:
        raise MonitoringError("%s: %r is no time at all" % (field, value))
    return seconds


def _domain(hostvars, host):
    return str(hostvars[host].get("nats_server_jetstream_domain") or "")


def _site_hosts(hostvars, servers):
    """{site: [hosts]} in inventory order; a server without a domain is its own site."""
    sites = {}
    for host in servers:
        sites.setdefault(_domain(hostvars, host) or host, []).append(host)
    return sites


def thresholds(hostvars, servers, default_account=""):
    """{"site/account/stream": {"max_age_seconds": s}} from the streams each site declares (its first host's
    nats_streams), each checked."""
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _aggregates, _fleet
    found = {}
    domains = list(dict.fromkeys(_domain(hostvars, host) for host in servers))
    for site, hosts in _site_hosts(hostvars, servers).items():
        if not isinstance(hostvars[hosts[0]].get("nats_streams") or [], list):
            continue
        try:  # with the regional streams of its aggregates (what the preflight refuses of those is not read)
            streams, labels = _fleet.host_streams(hostvars[hosts[0]], domains)
        except _aggregates.AggregateError:
            streams, labels = hostvars[hosts[0]].get("nats_streams") or [], {}
        for index, stream in enumerate(streams):
            if not isinstance(stream, dict):
                continue
            where = "%s: %s" % (hosts[0], labels.get(index) or "nats_streams[%d] (%s)" % (index, stream.get("name")))
            seconds = stream_age(stream, where)
            if seconds is not None:
                account = stream.get("account") or default_account or "$G"
                found["%s/%s/%s" % (site, account, stream.get("name"))] = {"max_age_seconds": seconds}
    return found


def settings_of(hostvars, host):
    """The ``nats_monitoring_*`` variables the inventory gives ``host``."""
    found = hostvars[host]
    return {name: found[name] for name in list(found.keys()) if str(name).startswith(SETTING_PREFIX)}


def check(settings, hostvars, inventory_hosts, servers, monitoring_hosts, default_account="", from_hosts=False):
    """The monitoring settings checked: each threshold by its kind, every host named by
    ``nats_monitoring_collect_from`` in the inventory and among the NATS servers, the monitoring hosts in the
    inventory, and every stream threshold of the fleet data a duration. Returns the checked settings.
    ``from_hosts``: check the settings the inventory gives each monitoring host instead of ``settings``."""
    inventory_hosts = list(inventory_hosts or [])
    servers = list(servers or [])
    for host in monitoring_hosts or []:
        if host not in inventory_hosts:
            raise MonitoringError("the monitoring host %r is not in the inventory (its hosts: %s)"
                                  % (host, ", ".join(inventory_hosts) or "none"))
    checked = {}
    if from_hosts:
        for host in monitoring_hosts or []:
            try:
                _check_settings(settings_of(hostvars, host), inventory_hosts, servers)
            except MonitoringError as exc:
                raise MonitoringError("%s: %s" % (host, exc)) from None
    else:
        checked = _check_settings(settings, inventory_hosts, servers)
    thresholds(hostvars, servers, default_account)
    return checked


def _check_settings(settings, inventory_hosts, servers):
    settings = dict(settings or {})
    checked = {}
    for name in sorted(settings):
        if name.startswith(SETTING_PREFIX):
            checked[name] = check_setting(name, settings[name])
    collect_from = settings.get("nats_monitoring_collect_from")
    if collect_from is not None:
        if not isinstance(collect_from, list) or not collect_from:
            raise MonitoringError("nats_monitoring_collect_from: %r is not a list of NATS servers" % (collect_from,))
        for index, host in enumerate(collect_from):
            field = "nats_monitoring_collect_from[%d]" % index
            if host not in inventory_hosts:
                raise MonitoringError("%s: the host %r is not in the inventory" % (field, host))
            if host not in servers:
                raise MonitoringError("%s: the host %r runs no nats-server (not in nats_servers)" % (field, host))
    return checked


def _creds_claims(path):
    """The claims of a creds file's user JWT; {} for a file that is not a creds file."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        return _jwt.parse_creds(text)[1]
    except _jwt.JWTError:
        return {}


def creds_expiry(creds_dir):
    """[{account, user, site, expires}] of every creds file under ``creds_dir`` whose JWT expires."""
    found = []
    if not os.path.isdir(creds_dir):
        return found
    for account in sorted(os.listdir(creds_dir)):
        folder = os.path.join(creds_dir, account)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            if name.endswith(".creds"):
                claims = _creds_claims(os.path.join(folder, name))
                if claims.get("exp"):
                    found.append({"account": account, "user": name[:-len(".creds")], "site": "fleet",
                                  "expires": int(claims["exp"])})
    return found


def account_names(store_dir):
    """{public key: name} of every account in the operator's store."""
    names = {}
    accounts = os.path.join(store_dir, "accounts")
    for name in sorted(os.listdir(accounts)) if os.path.isdir(accounts) else []:
        path = os.path.join(accounts, name, name + ".jwt")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                names[_jwt.decode(handle.read(), verify=False).get("sub")] = name
    return names


def _not_after(path):
    if not os.path.isfile(path):
        return None
    try:
        from cryptography import x509
    except ImportError as exc:
        raise MonitoringError("reading %s needs the Python library cryptography on the controller (%s)"
                              % (path, exc)) from None
    with open(path, "rb") as handle:
        certificate = x509.load_pem_x509_certificate(handle.read())
    after = getattr(certificate, "not_valid_after_utc", None) or certificate.not_valid_after
    return calendar.timegm(after.utctimetuple())


def leaf_links(hostvars, servers, system_account="SYS", monitor_links=True, names=None):
    """[{server, site, account}]: each leaf remote a server declares that names an account (the system
    account's remote by that account's name), and with ``monitor_links`` the system account's link the fleet
    gives every server with leaf remotes (nats_fleet_monitoring). ``names``: {public key: name}, for remotes
    the servers stage of the same run has already resolved to public keys."""
    names = names or {}
    links = []
    for host in servers:
        accounts = []
        for remote in hostvars[host].get("nats_server_leafnode_remotes") or []:
            if not isinstance(remote, dict):
                continue
            account = remote.get("account") or (system_account if remote.get("system_account") else None)
            account = names.get(account, account)
            if account and account not in accounts:
                accounts.append(account)
        if monitor_links and accounts and system_account not in accounts:
            accounts.append(system_account)
        links.extend({"server": str(hostvars[host].get("nats_server_name") or host),
                      "site": _domain(hostvars, host) or host, "account": account} for account in accounts)
    return links


def targets(hostvars, servers, fleet_dir, operator, collect_from, system_account="SYS", default_account="",
            monitor_links=True):
    """What the collector is told about the fleet (the exporter config's fleet part)."""
    servers = list(servers or [])
    names = {host: str(hostvars[host].get("nats_server_name") or host) for host in servers}
    sites = {host: _domain(hostvars, host) or host for host in servers}
    collect_site = sites.get((collect_from or [None])[0], "")
    accounts = account_names(os.path.join(fleet_dir, "nsc", "stores", operator))
    certificates = []
    for host in servers:
        after = _not_after(os.path.join(fleet_dir, "tls", "hosts", host + ".pem"))
        if after:
            certificates.append({"server": names[host], "site": sites[host], "not_after": after})
    return {
        # the collector reaches the servers it connects to by the names their certificates state
        "urls": ["tls://%s:%s" % (hostvars[host].get("nats_server_advertise_host") or host,
                                  hostvars[host].get("nats_server_port") or 4222) for host in collect_from or []],
        "servers": [{"server": names[host], "site": sites[host]} for host in servers],
        "collector_site": collect_site,
        "leaf_links": leaf_links(hostvars, servers, system_account, monitor_links, accounts),
        "accounts": accounts,
        "certificates": certificates,
        "creds": creds_expiry(os.path.join(fleet_dir, "creds")),
        "thresholds": thresholds(hostvars, servers, default_account),
        "budgets": budgets(hostvars, servers),
    }


def budgets(hostvars, servers):
    """{"origin site/account/stream": seconds} of every origin whose site declares an outage budget
    (nats_fleet_outage) and whose limits end it (as the fleet's preflight computes them)."""
    from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _fleet
    try:
        rows = _fleet.check_hosts(hostvars, list(servers or []), budgets=True)["budgets"]
    except _fleet.FleetError as exc:
        raise MonitoringError("the fleet's data (as the preflight of site.yml checks it): %s" % exc) from exc
    return dict(("%s/%s/%s" % (row["site"], row["account"], row["stream"]), row["budget"]) for row in rows
                if row["budget"] is not None)
