# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
name: spark_wheelhouse
author:
  - nats_edge.fleet contributors (@nats_edge)
short_description: What the Spark wheelhouse on the controller holds, when nothing it was built from has changed
description:
  - Reads the stamp the C(spark_runtime) role's wheelhouse build leaves beside a wheelhouse directory and returns
    the build's answer (C(wheels), C(package), C(listing)) when the package source, the versions, the hosts'
    architecture and Python, the extra requirements and the wheels themselves are as the stamp records them;
    else an empty dict, and the build has to run.
  - The role so skips the build's run (a module run on the controller) when the wheelhouse is current.
options:
  _terms:
    description: The wheelhouse directory (one per architecture and Python).
    required: true
    type: list
    elements: path
  source:
    description: The nats-edge-spark package source the wheel is built from.
    type: path
    required: true
  pyspark:
    description: The pyspark version.
    type: str
    required: true
  arch:
    description: The hosts' architecture (V(x86_64), V(aarch64)).
    type: str
    required: true
  python:
    description: The hosts' Python, major and minor (V(3.11)).
    type: str
    required: true
  extra:
    description: The extra requirements the wheelhouse holds wheels of.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
---
- name: Build the wheelhouse only when its stamp is not current
  ansible.builtin.debug:
    msg: "{{ lookup('nats_edge.fleet.spark_wheelhouse', '/srv/fleet/wheelhouse/x86_64-py311', source='/srv/spark',
             pyspark='4.0.1', arch='x86_64', python='3.11') or 'the build must run' }}"
"""

RETURN = r"""
---
_raw:
  description:
    - For each directory, the build's answer - C(changed) (false), C(wheels), C(package) (the nats-edge-spark wheel)
      and C(listing) (C(<wheel> <bytes>)) - or an empty dict when the build has to run.
  type: list
  elements: dict
"""

import os

from ansible.plugins.lookup import LookupBase

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _wheelhouse


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        wanted = _wheelhouse.inputs(self.get_option("source"), self.get_option("pyspark"), self.get_option("arch"),
                                    self.get_option("python"), self.get_option("extra"))
        results = []
        for folder in terms:
            known = _wheelhouse.unchanged(folder, wanted) if os.path.isdir(folder) else None
            results.append(dict(known, changed=False) if known is not None else {})
        return results
