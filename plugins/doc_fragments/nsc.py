# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Options of the modules that work on an nsc store."""

from __future__ import annotations


def _permissions(option, whom, summary):
    """The docs of a permissions option, written once for users and for an account's defaults."""
    rules = []
    for direction, verb in (("pub", "publish to"), ("sub", "subscribe to")):
        rules.append("""      %(direction)s:
        description: Subjects %(whom)s may %(verb)s.
        type: dict
        suboptions:
          allow:
            description: Subjects allowed (wildcards allowed); anything else is denied once this is set.
            type: list
            elements: str
          deny:
            description: Subjects denied, even when O(%(option)s.%(direction)s.allow) matches them.
            type: list
            elements: str
""" % dict(direction=direction, verb=verb, whom=whom, option=option))
    return """
options:
  %(option)s:
    description:
%(summary)s
      - Unknown keys are refused, so a typo cannot silently leave %(whom)s unrestricted.
    type: dict
    suboptions:
%(rules)s      resp:
        description: Allow %(whom)s to reply to requests they receive, without publish permission for the reply subjects.
        type: dict
        suboptions:
          max:
            description: Most replies per request.
            type: int
            default: 1
          ttl:
            description: How long a reply may take, as seconds or a duration such as V(5s); V(0) is no limit.
            type: raw
            default: 0
""" % dict(option=option, whom=whom, summary=summary, rules="".join(rules))


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

    USER_PERMISSIONS = _permissions("permissions", "the user", """\
      - What the user may publish and subscribe to, and whether it may reply to requests.
      - Left out, the account's default permissions apply.""")

    DEFAULT_PERMISSIONS = _permissions("default_permissions", "users", """\
      - Permissions of the account's users that have none of their own.""")
