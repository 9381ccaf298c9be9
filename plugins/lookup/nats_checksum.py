# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: nats_checksum
author:
  - nats_edge.fleet contributors (@nats_edge)
short_description: Checksum of files on the controller, binary or not
description:
  - Returns the checksum of each file named, read as bytes on the controller, in the form
    C(ansible.builtin.stat) and C(nats_edge.fleet.nats_server_state) report for files on hosts, so a
    role can tell whether a host's copy is current without a module run per file.
  - C(ansible.builtin.file) cannot do this for a binary such as nats-server, as it decodes the content as text.
options:
  _terms:
    description: Paths of files on the controller.
    required: true
    type: list
    elements: path
  algorithm:
    description: Hash algorithm, any C(hashlib) knows.
    type: str
    default: sha1
  details:
    description:
      - Return, for each path, a dict with C(exists), C(checksum) and C(mode) (octal, four digits) instead of
        the checksum alone. A missing file is then a dict with C(exists) false, not an error.
    type: bool
    default: false
notes:
  - Without O(details), a missing or unreadable file is an error that names the path.
"""

EXAMPLES = r"""
---
- name: Is the host's binary the controller's?
  ansible.builtin.debug:
    msg: "{{ lookup('nats_edge.fleet.nats_checksum', '/srv/builds/nats-server') }}"

- name: Checksum and mode of a file that may not exist yet
  ansible.builtin.debug:
    msg: "{{ lookup('nats_edge.fleet.nats_checksum', '/home/ops/.config/nats/context/hub.json', details=true) }}"
"""

RETURN = r"""
---
_raw:
  description: One hex digest per path, in the order given (with O(details), one dict per path).
  type: list
  elements: raw
"""

import hashlib
import os
import stat

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        algorithm = self.get_option("algorithm")
        if algorithm not in hashlib.algorithms_available:
            raise AnsibleLookupError("nats_checksum: unknown algorithm %r" % algorithm)
        details = self.get_option("details")
        results = []
        for term in terms:
            if details and not os.path.exists(term):
                results.append({"exists": False})
                continue
            digest = hashlib.new(algorithm)
            try:
                with open(term, "rb") as handle:
                    for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                        digest.update(block)
                mode = "%04o" % stat.S_IMODE(os.stat(term).st_mode)
            except (IOError, OSError) as exc:
                raise AnsibleLookupError("nats_checksum: cannot read %s: %s" % (term, exc.strerror or exc))
            results.append({"exists": True, "checksum": digest.hexdigest(), "mode": mode} if details else digest.hexdigest())
        return results
