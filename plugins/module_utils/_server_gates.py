# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gates a server passes, judged from what one monitoring endpoint answers, and the wait for them.

Private to the collection. ``gate_problems`` is pure (unit-tested without a server); the rollout's filter
(``nats_server_gate``) and the ``nats_server_wait`` module, which judges on the host itself until the gate
passes, both call it.
"""

from __future__ import annotations

import time

from ansible_collections.nats_edge.fleet.plugins.module_utils import _units
from ansible_collections.nats_edge.fleet.plugins.module_utils._host_state import HostReader


def _peer_names(routez):
    return sorted(set(r.get("remote_name") or r.get("remote_id") or "?" for r in routez.get("routes") or []))


def gate_problems(name, endpoint, data, peers=None, leafnodes=None, max_lag=0, version=None, leafs=None):
    """What keeps ``name`` from passing a gate, from one endpoint's JSON
    (``healthz``, ``varz``, ``routez``, ``leafz``, ``jsz`` read with
    ``accounts=true&streams=true``). An empty list means it passes.

    - healthz: the server's own JetStream-aware verdict (meta group and the
      streams and consumers it hosts are current);
    - varz: the running ``version``;
    - routez: routes to at least ``peers`` distinct servers;
    - leafz: at least ``leafnodes`` leaf connections, and every server named
      in ``leafs`` connected here;
    - jsz: a meta leader; for the meta group and every stream this server
      leads, every replica current, online and at most ``max_lag`` behind;
      every stream it hosts has a leader.
    """
    data = data if isinstance(data, dict) else {}
    problems = []
    if endpoint == "healthz":
        if data.get("status") != "ok":
            problems.append("%s: not healthy (%s)" % (name, data.get("error") or data.get("status") or "no answer"))
    elif endpoint == "varz":
        if version and data.get("version") != version:
            problems.append("%s: runs %s, not %s" % (name, data.get("version") or "nothing", version))
    elif endpoint == "routez":
        have = _peer_names(data)
        if peers is not None and len(have) < int(peers):
            problems.append("%s: routes to %d of %d peers (%s)" % (name, len(have), int(peers), ", ".join(have) or "none"))
    elif endpoint == "leafz":
        count = int(data.get("leafnodes") or 0)
        if leafnodes is not None and count < int(leafnodes):
            problems.append("%s: %d of %d leaf connections" % (name, count, int(leafnodes)))
        if leafs:
            connected = set(leaf.get("name") for leaf in data.get("leafs") or [])
            missing = sorted(set(leafs) - connected)
            if missing:
                problems.append("%s: leaf nodes not back: %s" % (name, ", ".join(missing)))
    elif endpoint == "jsz":
        problems += _jetstream_problems(name, data, int(max_lag or 0))
    else:
        raise ValueError("unknown endpoint %r" % endpoint)
    return problems


def _replica_problems(name, what, replicas, max_lag):
    problems = []
    for replica in replicas or []:
        lag = int(replica.get("lag") or 0)
        if replica.get("offline"):
            problems.append("%s: %s: replica %s offline" % (name, what, replica.get("name")))
        elif not replica.get("current"):
            problems.append("%s: %s: replica %s not current (lag %d)" % (name, what, replica.get("name"), lag))
        elif lag > max_lag:
            problems.append("%s: %s: replica %s lags %d" % (name, what, replica.get("name"), lag))
    return problems


def _jetstream_problems(name, jsz, max_lag):
    if not jsz:
        return ["%s: no JetStream report" % name]
    if jsz.get("disabled"):
        return []
    problems = []
    meta = jsz.get("meta_cluster") or {}
    server = jsz.get("server_name") or name
    if meta.get("cluster_size", len(meta.get("replicas") or []) + 1) > 1 or meta.get("replicas"):
        if not meta.get("leader"):
            problems.append("%s: JetStream has no meta leader" % name)
        elif meta.get("leader") == server:
            problems += _replica_problems(name, "meta group", meta.get("replicas"), max_lag)
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            cluster = stream.get("cluster") or {}
            what = "stream %s (account %s)" % (stream.get("name"), account.get("name") or account.get("id"))
            if not cluster.get("replicas") and cluster.get("leader", server) == server:
                continue  # a single replica: nothing to catch up
            if not cluster.get("leader"):
                problems.append("%s: %s has no leader" % (name, what))
            elif cluster.get("leader") == server:
                problems += _replica_problems(name, what, cluster.get("replicas"), max_lag)
    return problems


def loaded_problems(name, varz, after):
    """What keeps ``name`` from showing a config loaded later than ``after`` (seconds since the epoch), from its
    ``/varz``: an empty list means it has loaded one."""
    loaded = (varz or {}).get("config_load_time") if isinstance(varz, dict) else None
    if not loaded:
        return ["%s: no config load time (no answer)" % name]
    if _units.epoch_seconds(loaded) <= float(after):
        return ["%s: still runs the config it loaded at %s" % (name, loaded)]
    return []


def wait_for_gate(judge, url, timeout, interval=1.0, ca_path=None, clock=time.monotonic, sleep=time.sleep):
    """Read ``url`` until ``judge(json)`` (problems, [] when it passes) finds none, or ``timeout`` seconds pass.
    Returns {json, problems, attempts, waited}: problems empty when it passed, else the last read's (with why
    the server did not answer, when it did not)."""
    started = clock()
    attempts = 0
    while True:
        attempts += 1
        left = timeout - (clock() - started)
        data, error = HostReader.json_url(url, max(1.0, min(10.0, left)), ca_path=ca_path, error_body=True)
        problems = judge(data)
        if problems and data is None and error:
            problems = ["%s (%s)" % (problems[0], error)] + problems[1:]
        waited = clock() - started
        if not problems or waited + interval > timeout:
            return {"json": data, "problems": problems, "attempts": attempts, "waited": round(waited, 3)}
        sleep(interval)
