# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Attributes of the modules that only read."""

from __future__ import annotations


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: The module only reads; it runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  idempotent:
    support: full
    description: Never changes anything.
"""
