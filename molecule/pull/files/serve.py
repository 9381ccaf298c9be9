"""Serve /srv/pull over https (run with python3 by systemd-run) on port 8443 with the host's certificate from the fleet CA (what the sites verify)."""

import functools
import http.server
import ssl

server = http.server.ThreadingHTTPServer(("0.0.0.0", 8443), functools.partial(
    http.server.SimpleHTTPRequestHandler, directory="/srv/pull"))
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("/etc/nats-server/tls/server.pem", "/etc/nats-server/tls/server-key.pem")
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
