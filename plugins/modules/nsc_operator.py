#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nsc_operator
short_description: Manage a NATS operator, its system account and system user in an nsc store
description:
  - Creates the operator's identity key, an optional operator signing key, the system account (with the
    monitoring exports nsc gives it) and a system user with a creds file, in nsc's store layout.
  - Existing keys are reused; a JWT is signed again only when what it says changes.
  - The operator JWT (RV(operator_jwt_path)) and the system account JWT are what a server in operator
    mode needs (C(operator), C(system_account), C(resolver_preload)).
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.nsc
attributes:
  check_mode:
    support: full
    description: Reports what would change; writes no file.
  diff_mode:
    support: full
    description: Returns the operator claims before and after.
  idempotent:
    support: full
    description: A second run with the same options changes no file.
options:
  operator:
    description: Name of the operator (a directory and file name - no whitespace, V(.), V(*), V(>), V(/)).
    type: str
    required: true
    aliases: [name]
  state:
    description:
      - V(present) creates or updates the operator; V(absent) removes its JWTs and creds from the store
        (seeds stay in the key store, as with nsc).
    type: str
    choices: [present, absent]
    default: present
  signing_key:
    description:
      - Have an operator signing key and sign accounts with it. An existing one is reused.
      - V(false) adds none; signing keys the operator already has are kept, since accounts they signed
        would stop being valid.
    type: bool
    default: false
  service_urls:
    description:
      - NATS URLs of the operator's servers (C(operator_service_urls)). Left out keeps what the operator has;
        V([]) removes them.
    type: list
    elements: str
  account_server_url:
    description: URL of the account server. Left out keeps what the operator has; V("") removes it.
    type: str
  system_account:
    description:
      - Name of the system account. Every server of the operator is configured with its public key
        (C(system_account)), and the resolver takes pushes only from its users.
      - Naming another account than the operator's system account (or one not in the store) replaces the system
        account, which is refused unless O(replace_system_account=true).
    type: str
    default: SYS
  system_user:
    description: Name of the user of the system account that gets a creds file.
    type: str
    default: sys
  replace_system_account:
    description:
      - Let O(system_account) replace the operator's system account. The run then says, in a warning and in
        RV(system_account_replaced), which account was replaced by which; every server of the operator must be
        reconfigured with the new system account's public key (RV(system_account_id)) and restarted.
      - V(false) refuses a run whose O(system_account) is not the operator's system account, changing nothing, so a
        typo cannot cut every server off.
    type: bool
    default: false
notes:
  - The operator's system account is never removed by M(nats_edge.fleet.nsc_account) (O(nats_edge.fleet.nsc_account#module:state=absent)
    is refused for it); replace it here first.
  - O(service_urls) are C(nats://) or C(tls://) URLs with a host and no path or credentials; O(account_server_url)
    is an C(http://), C(https://), C(nats://) or C(tls://) URL. Anything else is refused before the store is read.
"""

EXAMPLES = r"""
---
- name: An operator with a signing key, system account and system user
  nats_edge.fleet.nsc_operator:
    operator: fleet
    signing_key: true
    service_urls: ["nats://hub-1:4222"]
  delegate_to: localhost
  register: fleet_operator

- name: Use the system user's creds for NATS modules
  ansible.builtin.set_fact:
    fleet_sys_creds: "{{ fleet_operator.sys_creds }}"
"""

RETURN = r"""
operator_public_key:
  description: Public key of the operator.
  returned: state is present
  type: str
operator_jwt_path:
  description: Path of the operator JWT.
  returned: state is present
  type: str
operator_jwt:
  description: The operator JWT (not secret).
  returned: state is present
  type: str
system_account_id:
  description: Public key of the system account.
  returned: state is present
  type: str
system_account_jwt:
  description: The system account JWT, for C(resolver_preload).
  returned: state is present
  type: str
system_account_jwt_path:
  description: Path of the system account JWT.
  returned: state is present
  type: str
sys_creds:
  description: Path of the system user's creds file (never its content).
  returned: state is present
  type: str
signing_keys:
  description: Public operator signing keys.
  returned: state is present
  type: list
  elements: str
system_account_replaced:
  description:
    - When this run replaced the operator's system account (O(replace_system_account=true)) - the account it
      replaced (C(previous), its name or null when no account of the store has its key; C(previous_id), its public
      key), the new one (C(name), C(account_id)), and C(msg), what to do now - every server of the operator must be
      reconfigured with C(account_id) as its system account and restarted.
  returned: when the system account was (or in check mode would be) replaced
  type: dict
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import bulk
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import common as nsc
from ansible_collections.nats_edge.fleet.plugins.module_utils._module import FleetModule
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.operator import ARGUMENT_SPEC, converge


def main():
    # what ansible-core would coerce (operator: true becomes the name 'True') is refused, named
    module, given = nsc.build_module(lambda spec: FleetModule(argument_spec=spec, supports_check_mode=True),
                                     ARGUMENT_SPEC)
    if given:
        fail_from(module, given)
    try:
        result = bulk.task(module, converge)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
