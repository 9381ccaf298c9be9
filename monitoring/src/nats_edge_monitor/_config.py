"""The exporter's config file (/etc/nats-edge-monitor/exporter.json): read, checked, every error naming its field."""

import json

__all__ = ["ConfigError", "load_config", "check_config"]


class ConfigError(Exception):
    """The config file cannot be used; the message names the field."""


_MISSING = object()


def _get(data, path, key, kinds, required=True, default=None):
    value = data.get(key, _MISSING) if isinstance(data, dict) else _MISSING
    field = "%s.%s" % (path, key) if path else key
    if value is _MISSING or value is None:
        if required:
            raise ConfigError("%s: missing" % field)
        return default
    if isinstance(value, bool) and bool not in kinds:
        raise ConfigError("%s: expected %s, got a boolean" % (field, _kind_names(kinds)))
    if not isinstance(value, kinds):
        raise ConfigError("%s: expected %s, got %s" % (field, _kind_names(kinds), type(value).__name__))
    if isinstance(value, str) and required and not value.strip():
        raise ConfigError("%s: empty" % field)
    return value


def _kind_names(kinds):
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
             dict: "an object"}
    return " or ".join(sorted(set(names.get(kind, kind.__name__) for kind in kinds)))


def _entries(data, key, fields, optional=()):
    """A list of objects, each with the string ``fields`` (and ``optional`` ones)."""
    value = _get(data, "", key, (list,), required=False, default=[])
    out = []
    for index, entry in enumerate(value):
        path = "%s[%d]" % (key, index)
        if not isinstance(entry, dict):
            raise ConfigError("%s: expected an object, got %s" % (path, type(entry).__name__))
        item = {}
        for name, kinds in fields:
            item[name] = _get(entry, path, name, kinds)
        for name, kinds in optional:
            item[name] = _get(entry, path, name, kinds, required=False)
        out.append(item)
    return out


def _per_stream(data, name):
    """(key, path, value) of each entry of the optional mapping ``name``, its keys site/account/stream."""
    for key, value in _get(data, "", name, (dict,), required=False, default={}).items():
        path = "%s.%s" % (name, key)
        if len(key.split("/")) != 3 or not all(key.split("/")):
            raise ConfigError("%s: the key must be site/account/stream" % path)
        yield key, path, value


def check_config(data):
    """The config as the exporter uses it (defaults filled in), or ConfigError naming the field."""
    if not isinstance(data, dict):
        raise ConfigError("the config file must hold a JSON object")
    config = {}
    listen = _get(data, "", "listen", (dict,))
    plaintext = _get(listen, "listen", "plaintext", (bool,), required=False, default=False)
    config["listen"] = {
        "address": _get(listen, "listen", "address", (str,), required=False, default="127.0.0.1"),
        "port": _get(listen, "listen", "port", (int,)),
        "plaintext": plaintext,
    }
    if not 0 <= config["listen"]["port"] <= 65535:
        raise ConfigError("listen.port: %r is not a port number" % config["listen"]["port"])
    for name in ("cert", "key", "client_ca"):
        config["listen"][name] = _get(listen, "listen", name, (str,), required=not plaintext)

    nats = _get(data, "", "nats", (dict,))
    servers = _get(nats, "nats", "servers", (list,))
    if not servers:
        raise ConfigError("nats.servers: empty")
    for index, url in enumerate(servers):
        if not isinstance(url, str) or not url.strip():
            raise ConfigError("nats.servers[%d]: expected a server URL" % index)
    timeout = _get(nats, "nats", "timeout", (int, float), required=False, default=2.0)
    if timeout <= 0:
        raise ConfigError("nats.timeout: must be more than 0")
    config["nats"] = {
        "servers": list(servers),
        "creds": _get(nats, "nats", "creds", (str,), required=False),
        "ca": _get(nats, "nats", "ca", (str,), required=False),
        "timeout": float(timeout),
        "plaintext": _get(nats, "nats", "plaintext", (bool,), required=False, default=False),
    }
    if not config["nats"]["ca"] and not config["nats"]["plaintext"]:
        raise ConfigError("nats.ca: missing (the CA the servers' certificates are verified against; "
                          "\"plaintext\": true in nats is the explicit opt-out)")

    config["servers"] = _entries(data, "servers", (("server", (str,)), ("site", (str,))))
    config["collector_site"] = _get(data, "", "collector_site", (str,))
    config["leaf_links"] = _entries(data, "leaf_links", (("server", (str,)), ("site", (str,)), ("account", (str,))))
    accounts = _get(data, "", "accounts", (dict,), required=False, default={})
    for key, name in accounts.items():
        if not isinstance(name, str):
            raise ConfigError("accounts.%s: expected a string (the account's name)" % key)
    config["accounts"] = dict(accounts)
    config["certificates"] = _entries(data, "certificates", (("server", (str,)), ("site", (str,)),
                                                             ("not_after", (int, float))))
    config["creds"] = _entries(data, "creds", (("account", (str,)), ("user", (str,)), ("site", (str,)),
                                               ("expires", (int, float))))
    config["thresholds"] = {}
    for key, path, entry in _per_stream(data, "thresholds"):
        if not isinstance(entry, dict):
            raise ConfigError("%s: expected an object" % path)
        seconds = _get(entry, path, "max_age_seconds", (int, float))
        if seconds <= 0:
            raise ConfigError("%s.max_age_seconds: must be more than 0" % path)
        config["thresholds"][key] = {"max_age_seconds": float(seconds)}
    config["budgets"] = {}
    for key, path, seconds in _per_stream(data, "budgets"):  # each an origin's
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise ConfigError("%s: expected a number of seconds above 0" % path)
        config["budgets"][key] = float(seconds)
    config["drift_file"] = _get(data, "", "drift_file", (str,), required=False)
    return config


def load_config(path):
    """check_config of the JSON file at ``path``."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError("config file %s: cannot read it: %s" % (path, exc.strerror or exc))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError("config file %s: not JSON: %s" % (path, exc))
    return check_config(data)
