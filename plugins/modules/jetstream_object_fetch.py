#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jetstream_object_fetch
short_description: Write an object of a JetStream object store, or of a copy of one, to a file, digest checked
description:
  - Reads an object from an object store - also from a read-only copy (O(nats_edge.fleet.jetstream_object_store#module:mirror))
    in an edge site's own domain, which keeps answering while the hub is down - and writes it to O(dest).
  - The file is written whole (a temporary file, then a rename) and only once the content matched the object's
    SHA-256 digest; a mismatch fails and leaves O(dest) as it was.
  - An object whose metadata carries another digest (such as C(MD5=...), written by another client) is refused and
    nothing is written - its content cannot be verified.
  - O(bucket) must be an object store (or a copy of one) in the domain the task reads; a key-value bucket of that
    name, no store of that name, or a O(domain) no server answers for fail saying so, and nothing is written.
  - Idempotent - when O(dest) already has the object's digest, only the object's metadata is read.
  - Run it on the host that needs the file (it needs nats-py there and a connection to the site's servers), or on
    the controller and copy the file to the host.
  - A copy created or updated a moment ago may not hold every chunk of the object yet; the module then fails
    saying so and writes nothing. Retry the task (O(ignore:until), as in the example) or wait first for the copy
    with M(nats_edge.fleet.jetstream_info) and O(nats_edge.fleet.jetstream_info#module:compare_origins).
author:
  - nats_edge.fleet contributors (@nats_edge)
extends_documentation_fragment:
  - nats_edge.fleet.connection
  - nats_edge.fleet.connection.jetstream
attributes:
  check_mode:
    support: full
    description: Reads the object's metadata and the file's digest, and reports whether the file would change.
  diff_mode:
    support: full
    description: Returns the file's digest and mode before and after (V(null) for a file not there yet).
  idempotent:
    support: full
    description: A second run writes nothing.
options:
  bucket:
    description: Name of the object store (or of the copy).
    type: str
    required: true
  name:
    description: Name of the object.
    type: str
    required: true
  dest:
    description:
      - The file to write - a regular file or none yet. Its directory must exist.
      - A directory, a symbolic link (neither followed nor replaced) or any other kind of file, and an empty O(dest),
        are refused before anything is read, naming O(dest).
    type: path
    required: true
  mode:
    description:
      - Mode of the written file, permission bits only - 3 or 4 octal digits, quoted (V("0640")); YAML's number for
        an unquoted V(0640) is taken too. A file with the object's content and another mode only has its mode set.
      - Refused before anything is read - a negative number, a boolean, more than 4 digits, the setuid, setgid or
        sticky bit, and an unquoted number without its leading 0 (V(644), which YAML reads as the decimal 644, the
        mode 1204; quote it).
    type: raw
    default: "0644"
seealso:
  - module: nats_edge.fleet.jetstream_object_store
"""

EXAMPLES = r"""
---
- name: Firmware from the site's own copy of the hub's store (works with the hub down)
  nats_edge.fleet.jetstream_object_fetch:
    servers: nats://127.0.0.1:4222
    domain: spoke-1
    bucket: firmware
    name: gateway-2.4.1.bin
    dest: /var/lib/gateway/gateway-2.4.1.bin
    mode: "0640"
  # a copy still filling fails with "N of its M chunks are there": try again
  register: firmware
  until: firmware is succeeded
  retries: 10
  delay: 3
"""

RETURN = r"""
digest:
  description: The object's digest (C(SHA-256=...)), which the written file has.
  returned: success
  type: str
size:
  description: Size of the object in bytes.
  returned: success
  type: int
dest:
  description: The file written.
  returned: success
  type: str
checksum:
  description:
    - SHA-1 of the file's content, as C(ansible.builtin.stat) and C(ansible.builtin.copy) report a file's, so
      copies of it elsewhere compare with it. In check mode, for a file that would be written, of the object's
      content (read and checked against its digest, not written).
  returned: success
  type: str
"""

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError, fail_from
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer as objects
from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import (
    JetStream, NatsClient, nats_module, require_nats_py)

ARGUMENT_SPEC = objects.FETCH_ARGUMENT_SPEC


def main():
    module = nats_module(ARGUMENT_SPEC, jetstream=True, supports_check_mode=True)
    p = module.params
    where = "object %r of bucket %r" % (p["name"], p["bucket"])
    try:
        # every check of the input before anything is read
        mode = objects.checked_fetch(p["bucket"], p["mode"], p["dest"])
    except NatsEdgeError as exc:
        fail_from(module, NatsEdgeError("%s: %s" % (where, exc), **exc.result))
    try:
        require_nats_py(p)
    except NatsEdgeError as exc:
        fail_from(module, exc)
    try:
        with NatsClient(p) as client:
            js = JetStream(client, domain=p.get("domain"), api_prefix=p.get("api_prefix"))
            result, diff = objects.fetch_file(client, js, p["bucket"], p["name"], p["dest"], mode, module.check_mode)
    except objects.FetchRefused as exc:
        fail_from(module, exc)  # it names the object
    except (NatsEdgeError, OSError) as exc:
        fail_from(module, NatsEdgeError("%s: %s" % (where, exc), **getattr(exc, "result", {})))
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
