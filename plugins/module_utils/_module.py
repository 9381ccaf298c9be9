# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The AnsibleModule every module of the collection runs as. Private to the collection.

Two things differ from ansible-core's:

- Input that does not fit the argument spec is reported with the option's
  path (``argument 'pub' is of type list found in 'permissions'``), not
  only with the first, anonymous conversion error
  (``dictionary requested, could not parse JSON or key=value``).
- Credentials written inside a URL (``nats://user:password@host``,
  ``nats://TOKEN@host``) never reach the output: their secret parts are
  masked like no_log values, also in the invocation shown at -vvv, and
  every message and warning is redacted.
"""

from __future__ import annotations

import re

from ansible.module_utils.basic import AnsibleModule

_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def redact(text):
    """``text`` with the credentials of every URL in it replaced by '***'."""
    if text is None:
        return None
    return _URL_USERINFO.sub(lambda m: "%s***@" % m.group("scheme"), str(text))


def url_secrets(urls):
    """The secret parts of URLs' userinfo: the password of user:password,
    the whole of a bare token."""
    secrets = set()
    for url in urls or []:
        for match in _URL_USERINFO.finditer(str(url)):
            userinfo = match.group("userinfo")
            secrets.add(userinfo)
            if ":" in userinfo:
                secrets.add(userinfo.split(":", 1)[1])
    return set(secret for secret in secrets if secret)


class FleetModule(AnsibleModule):
    """AnsibleModule with named validation errors and redacted URL credentials."""

    def __init__(self, *args, **kwargs):
        super(FleetModule, self).__init__(*args, **kwargs)
        secrets = url_secrets(self.params.get("servers"))
        if secrets:
            self.no_log_values.update(secrets)
            self.warn("servers: credentials written inside a server URL are hidden from the output; prefer the "
                      "user/password, token or creds options")

    def fail_json(self, msg=None, **kwargs):
        super(FleetModule, self).fail_json(msg=redact(self._named(msg)), **kwargs)

    def warn(self, warning):
        super(FleetModule, self).warn(redact(warning))

    def _named(self, msg):
        """During validation, the errors that name their option instead of
        ansible-core's first one, which for a list given as a dict comes from
        its no_log scan and names nothing."""
        validation = getattr(self, "validation_result", None)
        errors = list(getattr(validation, "errors", None) or [])
        if not errors or msg != errors[0].msg:
            return msg
        named = []
        for error in errors:
            if type(error).__name__ != "NoLogError" and error.msg not in named:
                named.append(error.msg)
        if not named or named[0] == msg:
            return msg
        return "; ".join(named)
