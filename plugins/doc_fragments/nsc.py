# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the modules that work on an nsc store."""

from __future__ import annotations


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  store_dir:
    description:
      - Directory of the nsc store; the operator's files are in C(<store_dir>/<operator>).
      - Defaults to E(NSC_STORE), then nsc's default directory.
    type: path
    default: ~/.local/share/nats/nsc/stores
  keys_dir:
    description:
      - Directory of the nsc key store (seeds under C(keys/), creds files under C(creds/)).
      - Defaults to E(NKEYS_PATH), then nsc's default directory.
    type: path
    default: ~/.local/share/nats/nsc/keys
  operator:
    description: Name of the operator.
    type: str
    required: true
  lock_timeout:
    description:
      - Seconds to wait for the store's lock. A run that may write holds an exclusive lock on O(store_dir)
        from its first read to its last write and push, so parallel runs (forks, C(delegate_to=localhost))
        apply their changes one after the other; reading runs take a shared lock.
      - When the time is up the module fails and changes nothing.
    type: float
    default: 120.0
notes:
  - The store has nsc's layout, so C(nsc) can read and edit what these modules write and the other way
    round. Claims these modules do not manage (for example exports added with C(nsc)) are kept.
  - Seeds and creds files are written with mode 0600 in directories created 0700; a file is replaced
    whole, never written in place.
  - Run these modules where the store is, usually the controller (with C(delegate_to=localhost)).
requirements:
  - nkeys (Python library)
"""
