# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sphinx configuration of the collection's docs site (`make docs`).

antsibull-docs writes the pages (build/docs/rst) from the collection's own
plugin and role docs; this renders them with the look of the Ansible docs.
"""

project = "nats_edge.fleet"
copyright = "nats_edge.fleet contributors"  # pylint: disable=redefined-builtin

title = "nats_edge.fleet"
html_short_title = "nats_edge.fleet"
html_title = "nats_edge.fleet collection documentation"

extensions = ["sphinx_antsibull_ext"]

pygments_style = "ansible"
highlight_language = "YAML+Jinja"

html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False

default_role = "any"
nitpicky = True
# The site is built offline, so it has no inventory of the Ansible docs: the
# pages antsibull-docs links to there stay plain text.
nitpick_ignore = [
    ("std:ref", "ansible_configuration_settings"),
    ("std:ref", "common_return_values"),
    ("std:ref", "callback_plugins"),
]
