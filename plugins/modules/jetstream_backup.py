#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_backup
short_description: Back up JetStream streams with their consumers, checksum verified, and restore them
description:
  - O(state=backup) takes a snapshot of each stream through the JetStream snapshot API - the server's own archive of
    the stream's messages and of its consumers with their delivered and acknowledged positions - and writes it to
    O(path) on the host the task runs on (delegate the task to V(localhost) to keep the backups on the controller).
  - Each stream gets a directory C(<path>/<stream>) (mode 0700) with the snapshot (C(snapshot.s2)), the stream's
    config and state at backup time (C(stream.json)) and C(manifest.json), which holds the sha256 and size of both,
    the server's version, the counts and each consumer's position. Every file is 0600. A new backup is written
    beside the old one and replaces it only once complete.
  - A second backup of a stream that did not change since - the same config, counts, sequences and consumer
    positions (the manifest's fingerprint) - writes nothing and reports no change. Any change, even one
    acknowledgement of a consumer, takes a new snapshot.
  - O(state=restore) verifies every file of every backup named against its manifest before anything is sent; a
    missing or damaged file is refused, naming it. The stream is created from the backup with its messages,
    sequences and consumers.
  - A restore never overwrites a stream silently. A stream that exists and holds exactly what the backup holds
    (counts, sequences and consumers) is left alone and reported V(unchanged); one that holds anything else is
    refused, naming it, unless O(replace=true), which deletes it and restores the backup.
  - A snapshot is read by the nats-server release that wrote it or a newer one; restoring onto an older server is
    refused before anything is sent, naming the versions.
  - Snapshots go to the stream's leader; the task's connection must reach the stream's domain (O(domain) or
    O(api_prefix)).
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
attributes:
  check_mode:
    support: full
    description: Reads the streams and the backups, verifies the backups' checksums, and reports per stream whether
      it would be written or restored; takes no snapshot and writes or restores nothing.
  diff_mode:
    support: full
    description: Returns the counts of each stream's backup (O(state=backup)) or of the stream (O(state=restore))
      before and after.
  idempotent:
    support: full
    description: A second backup of unchanged streams, and a second restore, change nothing.
options:
  state:
    description:
      - V(backup) writes a backup of the streams to O(path); V(restore) creates the streams from the backups in
        O(path).
    type: str
    choices: [backup, restore]
    default: backup
  streams:
    description:
      - The streams to back up or restore.
      - Left out - every stream of the account in the domain (O(state=backup)), every stream with a backup in
        O(path) (O(state=restore)).
    type: list
    elements: str
    aliases: [name]
  path:
    description:
      - The backup directory on the host the task runs on; created 0700 when missing. Each stream's backup is in
        the directory of its name below it.
    type: path
    required: true
  replace:
    description:
      - With O(state=restore), delete a stream that exists and holds anything else than its backup, and restore the
        backup in its place. Its messages since the backup are lost.
      - Without it, such a stream fails the task before anything is restored.
    type: bool
    default: false
  copies:
    description:
      - With O(state=restore), the streams that source the restored streams - the hub's aggregates of a site - each
        by C(stream) and C(domain), reached through this task's connection.
      - Such a copy already holds what the backup holds, and what was published after it up to the loss. Before a
        stream is restored, each copy's source of it is set to start at the sequence after the backup's last
        (C(opt_start_seq)), so the copy reads only what is published after the restore, without the backup's
        messages a second time. The next run of M(nats_edge.fleet.jetstream_stream) with the copy's own
        definition puts its start back (it reports that change once); the copy then goes on where it is.
      - A copy that does not exist, does not source the stream from this connection's domain, or mirrors it, fails
        the task before anything is restored.
      - nats-server 2.15 and newer notice that a stream they source was made again and start it at that sequence.
        Older servers do not notice it, go on after the last sequence they read from the lost stream, and so skip
        what is published after the restore up to that sequence; the task warns for such a copy.
    type: list
    elements: dict
    default: []
    suboptions:
      stream:
        description: The copy's name.
        type: str
        required: true
      domain:
        description: The copy's JetStream domain (left out - the domain of the connection's servers).
        type: str
  consumers:
    description:
      - With O(state=backup), include the streams' consumers (their configs and where each stands). V(false) backs
        up the messages alone; a restore of such a backup makes no consumer.
    type: bool
    default: true
  replicas:
    description:
      - With O(state=restore), the replicas of the restored streams, 1 to 5, in place of the backup's (for example a
        site's R1 stream restored as R3 into a cluster). Left out, as backed up.
    type: int
  placement:
    description:
      - With O(state=restore), where the restored streams go, in place of the backup's placement.
    type: dict
    suboptions:
      cluster:
        description: The cluster to restore into.
        type: str
      tags:
        description: Server tags every replica's server must have.
        type: list
        elements: str
  check_messages:
    description:
      - With O(state=backup), have the server check every message's checksum before it takes the snapshot (slower).
    type: bool
    default: false
notes:
  - A stream's backup holds the messages up to the moment of its snapshot; what is published after it is not in
    the backup, and is lost at the site (a hub that sourced it before the loss keeps it).
  - A stream that another stream sources, restored on a new host, is read by that source again from its first
    message (measured on nats-server 2.15.1) - the hub then holds the messages of the backup twice - unless the
    source is named in O(copies). Measured with a backup of 10 messages, 5 published after it and lost, and 8
    published after the restore - 2.15.1, without O(copies), the hub held 33 (the backup's 10 twice); with
    O(copies), 23 (10 + 5 + 8, none twice); 2.9.10, with or without, 18 (the first 5 published after the restore
    were not copied, see O(copies)).
seealso:
  - module: nats_edge.fleet.jetstream_stream
"""

EXAMPLES = r"""
---
- name: Back up every stream of the site to the controller
  nats_edge.fleet.jetstream_backup:
    servers: nats://edge-1.example.net:4222
    creds: /etc/fleet/admin.creds
    domain: spoke-1
    path: "/srv/backups/{{ inventory_hostname }}"
  delegate_to: localhost
  register: backup

- name: Restore a site's streams onto a new host
  nats_edge.fleet.jetstream_backup:
    servers: nats://edge-1.example.net:4222
    creds: /etc/fleet/admin.creds
    domain: spoke-1
    state: restore
    streams: [test]
    # the hub's aggregate already holds what the backup holds: it reads only what comes after it
    copies:
      - stream: aggregate
        domain: hub
    path: "/srv/backups/{{ inventory_hostname }}"
  delegate_to: localhost
"""

RETURN = r"""
streams:
  description: One entry per stream, in the order handled.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The stream.
      type: str
    action:
      description:
        - V(written) (a new backup), V(restored), V(replaced) (an existing stream deleted and restored) or
          V(unchanged). In check mode, what would be done.
      type: str
    path:
      description: The stream's backup directory.
      type: str
    messages:
      description: Messages in the backup (O(state=backup)), or in the restored stream.
      type: int
    bytes:
      description: Bytes of those messages.
      type: int
    consumers:
      description: Consumers in the backup, or of the restored stream.
      type: int
    first_seq:
      description: The first sequence held.
      type: int
    last_seq:
      description: The last sequence held.
      type: int
    taken:
      description: When the backup was taken (UTC, RFC 3339); not in check mode for a backup not yet written.
      type: str
      returned: when a backup exists
    copies:
      description:
        - With O(state=restore), each of O(copies) - C(stream), C(domain), C(start_seq) (the sequence it reads the
          restored stream from), C(changed) (whether its start was set, or would be in check mode) and, for a copy
          older than nats-server 2.15, C(warning). Empty for a stream left unchanged.
      type: list
      elements: dict
      returned: with O(state=restore)
  sample:
    - {name: telemetry, action: written, path: /srv/backups/edge-1/telemetry, messages: 1200, bytes: 96000,
       consumers: 1, first_seq: 1, last_seq: 1200, taken: "2026-11-28T18:00:00Z"}
diff:
  description: Counts per stream before and after (V(null) for none), in diff mode.
  returned: when diff mode is on
  type: dict
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import backup
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JetStream, NatsClient, nats_module, require_nats_py)

ARGUMENT_SPEC = backup.ARGUMENT_SPEC


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True)
    p = module.params
    try:
        streams = backup.check_streams(p["streams"])
        for option in ("replace", "copies", "replicas", "placement"):
            if p[option] and p["state"] != "restore":
                raise backup.BackupError("%s: applies to state=restore only" % option)
        if not p["consumers"] and p["state"] != "backup":
            raise backup.BackupError("consumers: applies to state=backup only (a restore restores what the backup "
                                     "holds)")
        backup.restored_config({}, p["replicas"], p["placement"])  # refused before anything is read
        require_nats_py(p)
    except NatsEdgeError as exc:
        fail_from(module, exc, streams=[])
    try:
        with NatsClient(p) as client:
            js = JetStream(client, domain=p.get("domain"), api_prefix=p.get("api_prefix"))
            if p["state"] == "backup":
                entries, before, after = backup.backup(client, js, streams, p["path"], module.check_mode,
                                                       p["check_messages"], p["consumers"])
            else:
                entries, before, after = backup.restore(client, js, streams, p["path"], p["replace"],
                                                        module.check_mode, p["copies"], p["replicas"],
                                                        p["placement"])
    except (NatsEdgeError, OSError) as exc:
        fail_from(module, NatsEdgeError("%s: %s" % (p["state"], exc), **getattr(exc, "result", {})), streams=[])
    for entry in entries:
        for copy in entry.get("copies") or ():
            if copy.get("warning"):
                module.warn(copy["warning"])
    result = dict(changed=any(entry["action"] != "unchanged" for entry in entries), streams=entries)
    if module._diff:
        result["diff"] = {"before": before, "after": after}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
