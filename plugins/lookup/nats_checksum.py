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
      - Return, for each path, a dict with C(exists), C(type) (V(file), V(directory) or V(link)), C(checksum) and
        C(mode) (octal, four digits) instead of the checksum alone. A missing file is then a dict with C(exists)
        false, not an error.
      - A directory has no C(checksum). A symbolic link has C(target), what it points to as written in the link;
        when it leads to a file, its C(checksum) and C(mode) are that file's, so a link is compared as the
        file it reaches.
      - A role can so tell whether a directory or a link on the controller is as it should be without a module run.
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

- name: Create the directory only when it is missing or open to others
  ansible.builtin.file:
    path: /home/ops/fleet
    state: directory
    mode: "0700"
  vars:
    _found: "{{ lookup('nats_edge.fleet.nats_checksum', '/home/ops/fleet', details=true) }}"
  when: _found.type | default('') != 'directory' or _found.mode != '0700'
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
            if details:
                results.append(self._details(term, algorithm))
            else:
                results.append(self._digest(term, algorithm))
        return results

    @staticmethod
    def _digest(term, algorithm):
        digest = hashlib.new(algorithm)
        try:
            with open(term, "rb") as handle:
                for block in iter(lambda handle=handle: handle.read(1 << 20), b""):
                    digest.update(block)
        except (IOError, OSError) as exc:
            raise AnsibleLookupError("nats_checksum: cannot read %s: %s" % (term, exc.strerror or exc))
        return digest.hexdigest()

    def _details(self, term, algorithm):
        try:
            found = os.lstat(term)
        except FileNotFoundError:
            return {"exists": False}
        except OSError as exc:
            raise AnsibleLookupError("nats_checksum: cannot read %s: %s" % (term, exc.strerror or exc))
        entry = {"exists": True}
        if stat.S_ISLNK(found.st_mode):
            entry.update(type="link", target=os.readlink(term))
            try:
                found = os.stat(term)
            except OSError:
                # a dangling link: there is nothing behind it to compare
                return entry
        else:
            entry["type"] = "directory" if stat.S_ISDIR(found.st_mode) else "file"
        entry["mode"] = "%04o" % stat.S_IMODE(found.st_mode)
        if stat.S_ISREG(found.st_mode):
            entry["checksum"] = self._digest(term, algorithm)
        return entry
