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
  - "Options are taken as written: a boolean where a name or other text is expected (an unquoted V(true), V(yes) or
    V(on), as in C(operator: true)), a boolean where a number is expected, or anything but a mapping where an option
    has suboptions (C(jetstream: true)) is refused naming the option, never turned into the name C(True)."
  - Limits, sizes and expiries are refused above what a server reads (a 64-bit integer), so a JWT no server accepts
    is never written.
requirements:
  - nkeys (Python library)
"""

    USER_PERMISSIONS = r"""
options:
  permissions:
    description:
      - What the user may publish and subscribe to, and whether it may reply to requests.
      - Left out, the account's default permissions apply.
      - Unknown keys are refused, so a typo cannot silently leave the user unrestricted.
    type: dict
    suboptions:
      pub:
        description: Subjects the user may publish to.
        type: dict
        suboptions:
          allow:
            description: Subjects allowed (wildcards allowed); anything else is denied once this is set.
            type: list
            elements: str
          deny:
            description: Subjects denied, even when O(permissions.pub.allow) matches them.
            type: list
            elements: str
      sub:
        description: Subjects the user may subscribe to.
        type: dict
        suboptions:
          allow:
            description: Subjects allowed (wildcards allowed); anything else is denied once this is set.
            type: list
            elements: str
          deny:
            description: Subjects denied, even when O(permissions.sub.allow) matches them.
            type: list
            elements: str
      resp:
        description: Allow the user to reply to requests they receive, without publish permission for the reply subjects.
        type: dict
        suboptions:
          max:
            description: Most replies per request - 1 or more, or V(-1) for no limit.
            type: int
            default: 1
          ttl:
            description: How long a reply may take, as seconds or a duration such as V(5s); V(0) is no limit.
            type: raw
            default: 0
"""

    # nsc_account, nsc_user and nsc_export push through the same code.
    PUSH_CONFIRM = r"""
options:
  expected_servers:
    description:
      - How many servers must confirm a push. Without it the module sends each JWT once, waits O(timeout) for
        answers and needs at least one.
      - With it, the module waits O(timeout) plus a quarter second for each further server expected (at most two
        minutes) for the answers, and sends the JWT again, twice at most, while some have not confirmed (a leaf
        link that was still connecting missed the first). Servers that already hold the JWT store nothing again.
      - When servers still have not confirmed, the task fails naming the account, the servers that refused it,
        those that are up but never answered, and how many never answered at all.
    type: int
"""

    # The same rules as USER_PERMISSIONS, for the account's default (the option names differ).
    DEFAULT_PERMISSIONS = r"""
options:
  default_permissions:
    description:
      - Permissions of the account's users that have none of their own.
      - Unknown keys are refused, so a typo cannot silently leave users unrestricted.
    type: dict
    suboptions:
      pub:
        description: Subjects users may publish to.
        type: dict
        suboptions:
          allow:
            description: Subjects allowed (wildcards allowed); anything else is denied once this is set.
            type: list
            elements: str
          deny:
            description: Subjects denied, even when O(default_permissions.pub.allow) matches them.
            type: list
            elements: str
      sub:
        description: Subjects users may subscribe to.
        type: dict
        suboptions:
          allow:
            description: Subjects allowed (wildcards allowed); anything else is denied once this is set.
            type: list
            elements: str
          deny:
            description: Subjects denied, even when O(default_permissions.sub.allow) matches them.
            type: list
            elements: str
      resp:
        description: Allow users to reply to requests they receive, without publish permission for the reply subjects.
        type: dict
        suboptions:
          max:
            description: Most replies per request - 1 or more, or V(-1) for no limit.
            type: int
            default: 1
          ttl:
            description: How long a reply may take, as seconds or a duration such as V(5s); V(0) is no limit.
            type: raw
            default: 0
"""
