# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Edges that pull: the bundle each one receives.

The servers stage gives the nats_server role, on each host, inputs that only the controller can compute: the
operator's JWT, the system account, the leaf remotes with the creds of their users, the host's certificate and the
fleet CA (read from the nsc store and the fleet's directory). An edge that pulls converges itself, so the
controller puts those inputs, and the files they name, in one bundle per host (``nats_edge.fleet.pull_publish``),
which only that host can decrypt. The host writes the files under its bundle directory and gives the role the
same inputs with the paths there (``nats_edge.fleet.pull``).
"""

from __future__ import annotations

import os
import posixpath

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError

#: where a bundle's paths start on the host: replaced by the host's bundle directory
PLACE = "@BUNDLE@"
#: the role inputs a bundle carries as they are
VALUES = ("nats_server_system_account", "nats_server_resolver_preload", "nats_server_tls_key_file",
          "nats_server_tls_renew_before")
#: the role inputs that name a controller file, and the name the file takes in the bundle
FILES = {"nats_server_operator_jwt_src": "operator.jwt", "nats_server_tls_cert_src": "tls/cert.pem",
         "nats_server_tls_ca_src": "tls/ca.pem"}
#: files of a bundle that are secrets (0600 on the host)
SECRET_DIRS = ("creds/", "secrets/")


class PullError(NatsEdgeError, ValueError):
    """A bundle that cannot be made, worded for the user."""


def _given(value):
    return value not in (None, "", [], {})


def _remote_files(inputs):
    """[(remote index, controller path, name in the bundle)] of the leaf remotes' creds files."""
    out = []
    for index, remote in enumerate(inputs.get("nats_server_leafnode_remotes") or []):
        path = (remote or {}).get("credentials_src")
        if path:
            account = os.path.basename(os.path.dirname(path)) or "remote"
            out.append((index, path, "creds/%s/%s" % (account, os.path.basename(path))))
    return out


def files(inputs, secrets=()):
    """The controller paths a bundle of ``inputs`` carries: the files the inputs name, the leaf remotes' creds,
    and ``secrets`` (files of the route and gateway passwords, where they exist)."""
    paths = [inputs[key] for key in FILES if _given(inputs.get(key))]
    paths += [path for _index, path, _name in _remote_files(inputs)]
    paths += [path for path in secrets or () if path]
    return list(dict.fromkeys(paths))


def bundle(inputs, contents, host, secrets=()):
    """The bundle of ``host``: {"host", "vars": the role inputs with paths under PLACE, "files": {name: {"content",
    "mode"}}}; ``contents``: {controller path: text} of every path ``files`` listed."""
    def content(path):
        if path not in contents:
            raise PullError("%s: the bundle needs %s, which was not read" % (host, path))
        return contents[path]

    out_vars, out_files = {}, {}
    for key in VALUES:
        if _given(inputs.get(key)):
            out_vars[key] = inputs[key]
    for key, name in FILES.items():
        if _given(inputs.get(key)):
            out_files[name] = content(inputs[key])
            out_vars[key] = posixpath.join(PLACE, name)
    remotes = [dict(remote) for remote in inputs.get("nats_server_leafnode_remotes") or []]
    for index, path, name in _remote_files(inputs):
        out_files[name] = content(path)
        remotes[index]["credentials_src"] = posixpath.join(PLACE, name)
    if remotes:
        out_vars["nats_server_leafnode_remotes"] = remotes
    if secrets:
        for path in secrets:
            out_files["secrets/" + os.path.basename(path)] = content(path)
        out_vars["nats_server_secrets_dir"] = posixpath.join(PLACE, "secrets")
    return {"host": host, "vars": out_vars,
            "files": {name: {"content": text, "mode": "0600" if name.startswith(SECRET_DIRS) else "0644"}
                      for name, text in sorted(out_files.items())}}


def placed(value, directory):
    """``value`` (a bundle's vars) with its paths under ``directory``, on the host."""
    if isinstance(value, dict):
        return {key: placed(item, directory) for key, item in value.items()}
    if isinstance(value, list):
        return [placed(item, directory) for item in value]
    if isinstance(value, str) and value.startswith(PLACE + "/"):
        return directory.rstrip("/") + value[len(PLACE):]
    return value


def check(bundle_value, host):
    """``bundle_value`` when it is a bundle made for ``host``; PullError naming what is wrong otherwise."""
    if not isinstance(bundle_value, dict) or not isinstance(bundle_value.get("vars"), dict) \
            or not isinstance(bundle_value.get("files"), dict):
        raise PullError("%s: the bundle is not one nats_edge.fleet.pull_publish made (host, vars, files)" % host)
    if bundle_value.get("host") != host:
        raise PullError("%s: the bundle was made for %r; each edge takes only its own (pull/<host>.vault)"
                        % (host, bundle_value.get("host")))
    for name in bundle_value["files"]:
        if name.startswith("/") or ".." in name.split("/"):
            raise PullError("%s: the bundle's file %r would land outside its directory" % (host, name))
    return bundle_value
