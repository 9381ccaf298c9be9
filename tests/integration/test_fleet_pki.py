"""The fleet CA (nats_fleet, stage servers, ``nats_fleet_tls: fleet``) through ansible-playbook, on two hosts that
are this machine (local connection): the CA and each host's certificate are made, a certificate verifies against
the CA with the names the host is reached by and matches the key made on the host, a second run changes nothing,
a new name or a renew_before beyond the remaining validity issues exactly that host's certificate again, check
mode changes nothing, and no private key reaches the output of a ``-vvv --diff`` run."""

import base64
import datetime
import hashlib
import ipaddress
import json
import os
import re
import stat
import subprocess
import sys

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from conftest import COLLECTIONS

HOSTS = ("h1", "h2")
SIGN_TASK = "Sign the host's certificate with the fleet CA"
# what the fleet's servers stage gives the nats_server role, shown by the play's last task
PLAY = """\
- name: The fleet's servers stage, without operator mode
  hosts: all
  gather_facts: false
  tasks:
    - name: Certificates from the fleet CA
      ansible.builtin.import_role:
        name: nats_edge.fleet.nats_fleet
        tasks_from: servers

    - name: Show the nats_server role's inputs
      ansible.builtin.debug:
        msg:
          cert_src: "{{ nats_server_tls_cert_src }}"
          ca_src: "{{ nats_server_tls_ca_src }}"
          key_file: "{{ nats_server_tls_key_file }}"
          default_ipv4: "{{ (ansible_default_ipv4 | default({})).address | default('') }}"
"""


class Fleet:
    """Two hosts (their config dirs under ``tmp_path/hosts``) and the controller's fleet dir, and the plays."""

    def __init__(self, tmp_path):
        self.root = tmp_path
        self.fleet_dir = tmp_path / "fleet"
        self.tls = self.fleet_dir / "tls"
        (tmp_path / "play.yml").write_text(PLAY)
        self.host_vars = {
            "h1": {"ansible_host": "127.0.0.2"},
            "h2": {"nats_server_advertise_host": "h2.example.net"},
        }
        self.group_vars = {"nats_fleet_tls_extra_sans": ["localhost", "127.0.0.1"]}

    def config_dir(self, host):
        return self.root / "hosts" / host

    def key_path(self, host):
        return self.config_dir(host) / "tls" / "server-key.pem"

    def cert_path(self, host):
        return self.tls / "hosts" / ("%s.pem" % host)

    def inventory(self):
        hosts = {}
        for host in HOSTS:
            hosts[host] = dict(ansible_connection="local", ansible_python_interpreter=sys.executable,
                               nats_server_config_dir=str(self.config_dir(host)), **self.host_vars[host])
        group = dict(nats_fleet_dir=str(self.fleet_dir), nats_fleet_operator_mode=False, **self.group_vars)
        path = self.root / "inventory.json"
        path.write_text(json.dumps({"all": {"hosts": hosts, "vars": group}}))
        return path

    def run(self, *args, callback="json"):
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_STDOUT_CALLBACK=callback,
                   ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_LOCALHOST_WARNING="0",
                   ANSIBLE_FORKS="5")
        env.pop("ANSIBLE_CONFIG", None)
        command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(self.inventory()),
                   str(self.root / "play.yml")] + list(args)
        proc = subprocess.run(command, cwd=str(self.root), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout[-6000:]
        return Run(proc.stdout) if callback == "json" else proc.stdout

    def snapshot(self):
        """Every file and directory under the test's root (but the plays' own files): mode and content."""
        out = {}
        for folder, _dirs, files in os.walk(str(self.root)):
            out[folder] = oct(os.stat(folder).st_mode)
            for name in files:
                path = os.path.join(folder, name)
                if os.path.dirname(path) == str(self.root):
                    continue
                with open(path, "rb") as handle:
                    out[path] = (oct(os.stat(path).st_mode), hashlib.sha256(handle.read()).hexdigest())
        return out


class Run:
    """One play's results as the json callback reports them."""

    def __init__(self, stdout):
        self.report = json.loads(stdout[stdout.index("{"):])

    def changed(self, host):
        return self.report["stats"][host]["changed"]

    def changed_tasks(self, host):
        return [task["task"]["name"].split(" : ", 1)[-1] for play in self.report["plays"] for task in play["tasks"]
                if task["hosts"].get(host, {}).get("changed")]

    def inputs(self, host):
        """What the nats_server role is given on ``host`` (the play's last task)."""
        return self.report["plays"][0]["tasks"][-1]["hosts"][host]["msg"]


def load_cert(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


def load_key(path):
    return serialization.load_pem_private_key(path.read_bytes(), password=None)


def public_der(key):
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def sans(cert):
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return (set(names.get_values_for_type(x509.DNSName)),
            set(str(address) for address in names.get_values_for_type(x509.IPAddress)))


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def wanted_sans(fleet, host, default_ipv4, extra=()):
    """(DNS names, IP addresses): the inventory name, ansible_host, nats_server_advertise_host, the default IPv4
    address and the extra names."""
    names, addresses = set(), set()
    for value in [host, default_ipv4, fleet.host_vars[host].get("ansible_host"),
                  fleet.host_vars[host].get("nats_server_advertise_host")] + ["localhost", "127.0.0.1"] + list(extra):
        if value:
            try:
                addresses.add(str(ipaddress.ip_address(value)))
            except ValueError:
                names.add(value)
    return names, addresses


def verify_with_openssl(fleet, host, name):
    """openssl's own chain check of the host's certificate against the CA, for a TLS server known as ``name``."""
    option = "-verify_ip" if re.match(r"^[0-9.]+$", name) else "-verify_hostname"
    proc = subprocess.run(["openssl", "verify", "-CAfile", str(fleet.tls / "ca.pem"), "-purpose", "sslserver",
                           option, name, str(fleet.cert_path(host))], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and ": OK" in proc.stdout, proc.stdout + proc.stderr


def check_issued(fleet, host, default_ipv4, extra=()):
    """``host``'s certificate on the controller: issued by the fleet CA, for the key on the host, with the names
    the host is reached by."""
    ca = load_cert(fleet.tls / "ca.pem")
    cert = load_cert(fleet.cert_path(host))
    cert.verify_directly_issued_by(ca)
    assert cert.issuer == ca.subject
    assert public_der(load_key(fleet.key_path(host))) == cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert sans(cert) == wanted_sans(fleet, host, default_ipv4, extra)
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage and ExtendedKeyUsageOID.CLIENT_AUTH in usage
    for name in (host, "localhost", "127.0.0.1"):
        verify_with_openssl(fleet, host, name)
    return cert


def days_left(cert):
    return (cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)).days


def pem_body(text):
    return [line for line in text.splitlines() if line and not line.startswith("-----")]


def private_material(path):
    """Strings that give away the private key in ``path``: its PEM body (as a whole and line by line, but for lines
    that only hold the public key it carries too), the key as DER in base64 and hex, and its private number in hex."""
    key = load_key(path)
    public = "".join(pem_body(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()))
    body = pem_body(path.read_text())
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    scalar = key.private_numbers().private_value.to_bytes(32, "big")
    return [line for line in body if line not in public] + [
        "".join(body), base64.b64encode(der).decode(), der.hex(), scalar.hex(), base64.b64encode(scalar).decode()]


@pytest.fixture
def fleet(tmp_path):
    return Fleet(tmp_path)


def test_the_fleet_ca_issues_each_hosts_certificate_once_and_again_only_when_asked(fleet):
    first = fleet.run()
    default_ipv4 = first.inputs("h1")["default_ipv4"]

    # the CA, at the modes its secrets need
    assert mode(fleet.tls) == 0o700
    assert mode(fleet.tls / "ca-key.pem") == 0o600
    ca_key = load_key(fleet.tls / "ca-key.pem")
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey) and ca_key.curve.name == "secp256r1"
    ca = load_cert(fleet.tls / "ca.pem")
    assert public_der(ca_key) == ca.public_key().public_bytes(serialization.Encoding.DER,
                                                              serialization.PublicFormat.SubjectPublicKeyInfo)
    ca.verify_directly_issued_by(ca)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign and not usage.digital_signature
    assert 3648 <= days_left(ca) <= 3650

    # each host: its own key, made on the host, and a certificate for it
    certs = {}
    for host in HOSTS:
        assert mode(fleet.key_path(host)) == 0o600
        assert isinstance(load_key(fleet.key_path(host)), ec.EllipticCurvePrivateKey)
        certs[host] = check_issued(fleet, host, default_ipv4)
        assert 363 <= days_left(certs[host]) <= 365
        assert first.inputs(host) == dict(cert_src=str(fleet.cert_path(host)), ca_src=str(fleet.tls / "ca.pem"),
                                          key_file=str(fleet.key_path(host)), default_ipv4=default_ipv4)
    assert public_der(load_key(fleet.key_path("h1"))) != public_der(load_key(fleet.key_path("h2")))
    # the controller holds no private key but the CA's
    holding = [os.path.join(folder, name) for folder, _dirs, files in os.walk(str(fleet.fleet_dir)) for name in files
               if b"PRIVATE KEY" in open(os.path.join(folder, name), "rb").read()]
    assert holding == [str(fleet.tls / "ca-key.pem")]

    # a second run changes nothing
    second = fleet.run()
    assert [second.changed(host) for host in HOSTS] == [0, 0], [second.changed_tasks(host) for host in HOSTS]
    before = fleet.snapshot()

    # a new name for h1: check mode predicts h1's certificate and changes nothing ...
    fleet.host_vars["h1"]["nats_fleet_tls_extra_sans"] = ["localhost", "127.0.0.1", "h1.new.example", "10.9.8.7"]
    predicted = fleet.run("--check", "--diff")
    assert predicted.changed_tasks("h1") == [SIGN_TASK] and predicted.changed("h2") == 0
    assert fleet.snapshot() == before

    # ... and the run issues h1's certificate again, for the same key, and leaves h2's alone
    renamed = fleet.run()
    assert renamed.changed_tasks("h1") == [SIGN_TASK] and renamed.changed("h2") == 0
    check_issued(fleet, "h1", default_ipv4, extra=["h1.new.example", "10.9.8.7"])
    after = fleet.snapshot()
    assert [path for path in before if before[path] != after.get(path)] == [str(fleet.cert_path("h1"))]
    assert fleet.run().changed("h1") == 0

    # h2's certificate expires within a renew_before longer than its validity: issued again, h1's not
    before = fleet.snapshot()
    fleet.host_vars["h2"]["nats_fleet_tls_renew_before"] = 400
    predicted = fleet.run("--check")
    assert predicted.changed_tasks("h2") == [SIGN_TASK] and predicted.changed("h1") == 0
    assert fleet.snapshot() == before
    renewed = fleet.run()
    assert renewed.changed_tasks("h2") == [SIGN_TASK] and renewed.changed("h1") == 0
    new_h2 = check_issued(fleet, "h2", default_ipv4)
    assert new_h2.serial_number != certs["h2"].serial_number
    after = fleet.snapshot()
    assert [path for path in before if before[path] != after.get(path)] == [str(fleet.cert_path("h2"))]

    # the address h2 advertises to its cluster (host:port) is a name of its certificate: implicit routes verify it
    fleet.host_vars["h2"]["nats_server_cluster_advertise"] = "h2.routes.example:16222"
    rerouted = fleet.run()
    assert rerouted.changed_tasks("h2") == [SIGN_TASK] and rerouted.changed("h1") == 0
    check_issued(fleet, "h2", default_ipv4, extra=["h2.routes.example"])


def test_a_first_run_in_check_mode_changes_nothing_and_predicts_the_ca_and_the_keys(fleet):
    # h2's key directory is there already, h1's not
    fleet.key_path("h2").parent.mkdir(parents=True)
    before = fleet.snapshot()
    predicted = fleet.run("--check", "--diff")
    assert fleet.snapshot() == before
    assert predicted.changed_tasks("h1") == ["Make the CA's directories", "Make the key directory"]
    assert predicted.changed_tasks("h2") == ["Make the host's key on the host"]


def test_a_roll_in_check_mode_changes_nothing_and_predicts_the_next_ca(fleet):
    # a fleet with its CA and certificates, then each step of a roll in check mode: nothing written, the next CA's
    # key predicted in the first step (its request, from a key not made yet, is not attempted)
    fleet.run()
    before = fleet.snapshot()
    for step in ("trust", "issue", "retire"):
        predicted = fleet.run("--check", "--diff", "-e", "nats_fleet_tls_ca_roll=%s" % step)
        assert fleet.snapshot() == before, step
        if step == "trust":
            assert "Make the key of ca-next" in predicted.changed_tasks("h1")
    assert not (fleet.tls / "ca-next-key.pem").exists()


def test_no_private_key_reaches_the_output(fleet):
    """The output of the runs that make the keys and sign with the CA's (a first run, then a new name for h2),
    at -vvv with diffs, holds no line of a private key."""
    output = fleet.run("-vvv", "--diff", callback="default")
    fleet.host_vars["h2"]["nats_fleet_tls_extra_sans"] = ["h2.other.example"]
    output += fleet.run("-vvv", "--diff", callback="default")
    # both runs signed
    assert output.count("TASK [nats_edge.fleet.nats_fleet : %s]" % SIGN_TASK) == 2
    assert output.count("changed: [h2 -> localhost]") >= 2
    for path in [fleet.tls / "ca-key.pem"] + [fleet.key_path(host) for host in HOSTS]:
        for needle in private_material(path):
            assert needle not in output, "%s: private key material in the output" % path
    assert "PRIVATE KEY" not in output
