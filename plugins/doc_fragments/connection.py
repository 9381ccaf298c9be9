# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options shared by every NATS module."""

from __future__ import annotations


class ModuleDocFragment(object):
    DOCUMENTATION = r"""
options:
  servers:
    description:
      - NATS server URLs to connect to (the first that answers is used).
      - Defaults to the comma-separated E(NATS_URL), then C(nats://127.0.0.1:4222).
    type: list
    elements: str
    aliases: [server]
  creds:
    description: Credentials file (JWT and seed) of the user to connect as. Defaults to E(NATS_CREDS).
    type: path
  nkey_seed:
    description: File holding the NKey seed of the user to connect as. Defaults to E(NATS_NKEY).
    type: path
  user:
    description: User name for user/password authentication. Defaults to E(NATS_USER).
    type: str
  password:
    description: Password for O(user). Defaults to E(NATS_PASSWORD).
    type: str
  token:
    description: Authentication token. Defaults to E(NATS_TOKEN).
    type: str
  tls_ca:
    description: CA certificate file to verify the server with. Defaults to E(NATS_CA).
    type: path
  tls_cert:
    description: Client certificate file. Defaults to E(NATS_CERT).
    type: path
  tls_key:
    description: Key of O(tls_cert). Defaults to E(NATS_KEY).
    type: path
  tls_handshake_first:
    description:
      - Start the TLS handshake as soon as the connection opens, before the server's C(INFO), for a server whose
        client port wants it (C(handshake_first) in its C(tls) block; the C(nats_server) role's
        C(nats_server_client_tls_handshake_first)), as behind middleboxes that drop or inspect plaintext. NACK calls
        it C(tlsFirst), the C(nats) CLI C(--tlsfirst).
      - Such a server closes a connection that waits for its C(INFO) (unless it has a fallback delay), and a server
        without it does not answer a client that starts with the handshake; the module's error says which.
      - The server's certificate is verified against O(tls_ca), else the system's CAs. Not for websocket URLs
        (V(wss://) runs TLS there). Needs nats-py 2.6.0 or later.
    type: bool
    default: false
  creds_data:
    description:
      - The text of a creds file (the user's JWT and seed), as from a vault, in place of O(creds). It is written to a
        file only the module's user reads, in a directory of its own, for the connection, and removed when it closes.
        Never shown in the output. Not with O(creds), O(nkey_seed), O(user) or O(token).
    type: str
  user_jwt:
    description:
      - A file holding the user's JWT alone, with its seed in O(nkey_seed) (natscli C(--jwt) and C(--seed)), in place
        of a creds file holding both. Not with O(creds), O(creds_data), O(user) or O(token).
    type: path
  tls_ca_data:
    description: The PEM text of the CA certificate(s) the servers are verified against, in place of O(tls_ca).
    type: str
  tls_cert_data:
    description:
      - The PEM text of the client certificate, in place of O(tls_cert); with O(tls_key_data) or O(tls_key), or the
        key in the same text. Written to a private file for the connection as O(creds_data) is.
    type: str
  tls_key_data:
    description:
      - The PEM text of the client certificate's key, in place of O(tls_key). Written to a private file for the
        connection as O(creds_data) is; never shown in the output.
    type: str
  inbox_prefix:
    description:
      - The prefix of the subjects the replies to the module's requests come back on (C(<inbox_prefix>.<id>)), in
        place of C(_INBOX), for a user whose permissions let it subscribe only below its own prefix (natscli
        C(--inbox-prefix)). Tokens separated by C(.), without wildcards.
    type: str
  connection_name:
    description:
      - The name the module's connection gives the server (C(name) in C(/connz) and in the server's logs), to tell the
        automation's connections apart (natscli C(--connection-name)).
    type: str
    default: ansible nats_edge.fleet
  timeout:
    description: Seconds to wait for the connection and for each reply. Defaults to E(NATS_TIMEOUT).
    type: float
    default: 5.0
requirements:
  - nats-py (Python library on the host the module runs on, usually the controller)
notes:
  - Set these once for every NATS module with C(module_defaults) and the action group
    C(group/nats_edge.fleet.nats).
  - One connection per module run, without reconnects; it is drained when the run ends.
"""

    JETSTREAM = r"""
options:
  domain:
    description:
      - JetStream domain to manage the resource in; the API becomes C($JS.<domain>.API).
      - Mutually exclusive with O(api_prefix).
    type: str
  api_prefix:
    description:
      - JetStream API prefix to use instead, for an API imported from another account
        (for example C(JS.test@hub.API)).
    type: str
"""
