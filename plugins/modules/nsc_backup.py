#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nsc_backup
short_description: Back up an operator's nsc store - JWTs, seeds and creds - checksum verified, and restore it
description:
  - O(state=backup) writes the operator's part of the nsc store to O(path) - a directory (mode 0700) that holds one
    backup of one operator - as one archive (C(<operator>.<sha256>.tar.gz), or C(.tar) with O(compress=false)) and
    C(manifest.json). Every file is 0600.
  - The archive holds the operator's directory C(<store_dir>/<operator>) (its JWT, its accounts' and users' JWTs,
    the C(.nsc) marker and the keys a rotation keeps), its creds files C(<keys_dir>/creds/<operator>), and from
    C(<keys_dir>/keys) the seeds of the keys the operator's JWTs name - the operator's, its accounts' and its
    users' identity and signing keys - that the key store holds. Seeds of other operators in the same key store
    are left out.
  - The manifest holds the format, the operator's name and public key, the archive's name, sha256 and size, every
    member's path, sha256 and size, and when the backup was made.
  - A new archive is written under a new name, then the manifest is renamed over the old one, then the old archive
    is removed, so an interrupted run leaves the last good backup. There is one backup per O(path); keep older
    ones by giving each its own O(path).
  - A second backup of a store that did not change since - the same files with the same checksums - writes nothing
    and reports no change. A backup that is damaged is written again.
  - O(state=restore) verifies the manifest, the archive's sha256 and every member's before anything is written; a
    damaged or missing file is refused, naming it. Members that are not plain files (symlinks, links,
    directories), or whose names are absolute, hold C(..) or lie outside the operator's directory, seeds and
    creds, are refused. A seed that is not the seed of the key it is named after is refused.
  - A restore never overwrites a store silently. A store that holds exactly what the backup holds for the operator
    is left alone and reported V(unchanged); one that holds anything else for it (other JWTs, creds or seeds of its
    keys) is refused, naming the operator and the files, unless O(replace=true).
  - Seeds and creds are never read into the result or the messages; only their paths and checksums are.
  - The store's lock (O(lock_timeout)) is held while the store is read (shared, O(state=backup)) or written
    (exclusive, O(state=restore)), so other runs of the nsc modules wait for it.
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.nsc
attributes:
  check_mode:
    support: full
    description: Reads the store and the backup, verifies the backup's checksums, and reports whether the backup
      would be written or the store restored or replaced (or refused); writes nothing.
  diff_mode:
    support: full
    description: Returns the members (path and sha256) of the backup (O(state=backup)) or of the operator's part of
      the store (O(state=restore)) before and after.
  idempotent:
    support: full
    description: A second backup of an unchanged store, and a second restore, change nothing.
options:
  state:
    description:
      - V(backup) writes a backup of the operator's part of the store to O(path); V(restore) puts the backup in
        O(path) into the store.
    type: str
    choices: [backup, restore]
    default: backup
  path:
    description:
      - The backup directory on the host the task runs on; created 0700 when missing. It holds the backup of one
        operator; a backup of another operator there is refused, naming both.
      - A directory inside the operator's directory or O(keys_dir) is refused (a backup would hold itself, a restore
        would remove it).
    type: path
    required: true
  replace:
    description:
      - With O(state=restore), replace what the store holds for the operator when it is not what the backup holds.
        The operator's directory and its creds directory are replaced whole; seeds are only added (or put right
        when they differ from the backup's), as nsc never removes a seed.
      - Without it, such a store fails the task before anything is written.
    type: bool
    default: false
  compress:
    description:
      - With O(state=backup), write a gzip-compressed archive (C(.tar.gz)); V(false) writes a plain C(.tar).
      - A backup whose archive is not compressed as asked is written again.
    type: bool
    default: true
notes:
  - The creds files in the backup hold their users' seeds, and the seeds are the operator's keys; keep the backup
    directory as private as the key store.
  - A restore that fails half way (a full disk) leaves seeds it added; the operator's directory and its creds
    directory are each replaced in one rename.
seealso:
  - module: nats_edge.fleet.nsc_store
  - module: nats_edge.fleet.nsc_info
  - module: nats_edge.fleet.jetstream_backup
"""

EXAMPLES = r"""
---
- name: Back up the fleet's operator, its accounts, users, seeds and creds
  nats_edge.fleet.nsc_backup:
    operator: fleet
    path: /srv/backups/nsc/fleet
  delegate_to: localhost
  register: nsc_backup

- name: Restore it into the store (unchanged when the store already holds it)
  nats_edge.fleet.nsc_backup:
    operator: fleet
    state: restore
    path: /srv/backups/nsc/fleet
  delegate_to: localhost
"""

RETURN = r"""
action:
  description:
    - V(written) (a new backup), V(unchanged), V(restored) (into a store that held nothing of the operator) or
      V(replaced) (with O(replace=true)). In check mode, what would be done.
  returned: success
  type: str
  sample: written
operator:
  description: The operator.
  returned: success
  type: str
  sample: fleet
operator_public_key:
  description: The operator's public key, as the backup holds it.
  returned: success
  type: str
  sample: ODSKR7MYFQZ5MMAJ6FPMEEYGU3RWFVNJ2PCFAO2NUXVZKY5QMXMPBOGD
backup_dir:
  description: The backup directory (O(path)).
  returned: success
  type: str
  sample: /srv/backups/nsc/fleet
manifest:
  description: The backup's manifest.
  returned: success
  type: str
  sample: /srv/backups/nsc/fleet/manifest.json
archive:
  description: The backup's archive (in check mode, the name it would have).
  returned: success
  type: str
  sample: /srv/backups/nsc/fleet/fleet.3f1c0a9b2d4e.tar.gz
archive_sha256:
  description: The sha256 of the archive.
  returned: success
  type: str
archive_size:
  description: The archive's size in bytes.
  returned: success
  type: int
created:
  description: When the backup was made (UTC, RFC 3339).
  returned: success
  type: str
  sample: "2026-11-28T18:00:00Z"
store_path:
  description: The operator's directory in the store (C(<store_dir>/<operator>)).
  returned: success
  type: str
keys_dir:
  description: The key store the seeds and creds are in.
  returned: success
  type: str
counts:
  description: How many C(accounts), C(users) (JWTs), C(seeds), C(creds) files and C(files) in all the backup
    holds.
  returned: success
  type: dict
  sample: {accounts: 3, users: 4, seeds: 9, creds: 4, files: 17}
diff:
  description: The members (path and sha256) before and after, in diff mode.
  returned: when diff mode is on
  type: dict
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import backup
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc

ARGUMENT_SPEC = backup.ARGUMENT_SPEC


def main():
    # what ansible-core would coerce (operator: true becomes the name 'True') is refused, named
    module, given = nsc.build_module(lambda spec: FleetModule(argument_spec=spec, supports_check_mode=True),
                                     ARGUMENT_SPEC)
    if given:
        fail_from(module, given)
    p = module.params
    try:
        nsc.require_nkeys()
        backup.Store(p["store_dir"], p["keys_dir"], p["operator"])  # the operator's name is checked
        if p["replace"] and p["state"] != "restore":
            raise backup.BackupError("replace: applies to state=restore only")
        nsc.warn_loose_keys_dir(module, p["keys_dir"])
    except NatsEdgeError as exc:
        fail_from(module, backup.BackupError("operator %r: %s" % (p["operator"], exc)))
    try:
        if p["state"] == "backup":
            result, diff = backup.backup(p, module.check_mode)
        else:
            result, diff = backup.restore(p, module.check_mode)
    except (NatsEdgeError, OSError) as exc:
        fail_from(module, backup.BackupError("operator %r: %s: %s" % (p["operator"], p["state"], exc)))
    result["changed"] = result["action"] != "unchanged"
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
