"""A server's certificate, key and CA checked as its peers check them (nats_server_state's tls_check, a handshake
in memory), and what the check found judged on the controller (nats_server_tls_problems): each problem named with
the file and the name or date."""

import os
import sys
import time

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._host_state import check_certificate
from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _certificates as certs

sys.path.insert(0, os.path.join(os.path.dirname(__file__), *[os.pardir] * 3, "integration"))
import pki  # noqa: E402  (the integration tests' certificates, made with the cryptography library)

DAY = 86400.0


@pytest.fixture
def ca(tmp_path):
    return pki.CA(tmp_path)


def test_a_fit_certificate_has_no_problem_and_tells_its_dates_and_names(ca):
    cert, key = ca.issue("hub-1", sans=("hub-1", "10.0.0.11"), days=90)
    found = check_certificate(cert, key, ca.path, mutual=True)
    assert found["problems"] == []
    assert found["sans"] == {"dns": ["hub-1"], "ip": ["10.0.0.11"]}
    assert found["not_after"] == pytest.approx(time.time() + 90 * DAY, abs=120)
    assert certs.problems(found, "hub-1", {}, ["hub-1", "10.0.0.11:6222"], 30) == []


def test_a_key_of_another_certificate_is_named(ca):
    cert, _key = ca.issue("hub-1")
    _other_cert, other_key = ca.issue("hub-2")
    found = check_certificate(cert, other_key, ca.path)
    assert found["problems"] == [{"file": "key", "error": "%s does not match the certificate's public key" % other_key}]


def test_a_certificate_of_another_ca_does_not_verify(ca, tmp_path):
    stranger = pki.CA(tmp_path, name="stranger")
    cert, key = stranger.issue("hub-1")
    (problem,) = check_certificate(cert, key, ca.path)["problems"]
    assert problem["file"] == "cert"
    assert problem["error"] == "%s does not verify against %s: unable to get local issuer certificate" % (cert, ca.path)


def test_a_missing_or_empty_ca_is_named(ca, tmp_path):
    cert, key = ca.issue("hub-1")
    missing = str(tmp_path / "nope.pem")
    assert check_certificate(cert, key, missing)["problems"] == [{"file": "ca", "error": "%s: no such file" % missing}]
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    (problem,) = check_certificate(cert, key, str(junk))["problems"]
    assert problem["file"] == "ca" and problem["error"].startswith("%s: no usable CA certificate" % junk)


def test_a_server_only_certificate_is_refused_where_peers_present_it(ca):
    cert, key = ca.issue("hub-1", usages=("server",))
    assert check_certificate(cert, key, ca.path)["problems"] == []
    (problem,) = check_certificate(cert, key, ca.path, mutual=True)["problems"]
    assert "is not accepted as a client's certificate" in problem["error"]


def test_an_expired_certificate_tells_its_date(ca):
    cert, key = ca.issue("hub-1", days=-2, ago=30)
    found = check_certificate(cert, key, ca.path, mutual=True)
    assert found["problems"] == [] and found["not_after"] < time.time()
    (message,) = certs.problems(found, "hub-1", {"cert": cert}, ["localhost"], 30)
    assert message.startswith("hub-1: certificate %s expired on " % cert)
    assert message.endswith(certs._day(found["not_after"]))


def test_a_certificate_due_within_renew_before_is_refused_unless_the_margin_is_lower(ca):
    cert, key = ca.issue("hub-1", days=10)
    found = check_certificate(cert, key, ca.path)
    (message,) = certs.problems(found, "", {"cert": cert}, [], 30)
    assert message.startswith("certificate %s expires on " % cert)
    assert "within nats_server_tls_renew_before (30 days)" in message
    assert certs.problems(found, "", {"cert": cert}, [], 5) == []
    assert certs.problems(found, "", {"cert": cert}, [], 0) == []
    with pytest.raises(certs.CertificateError, match="nats_server_tls_renew_before: 'soon'"):
        certs.problems(found, "", {}, [], "soon")


def test_every_name_the_certificate_is_not_valid_for_is_named(ca):
    cert, key = ca.issue("hub-1", sans=("hub-1", "*.hub.example.net", "10.0.0.11", "fd00::11"))
    found = check_certificate(cert, key, ca.path)
    names = ["hub-1", "HUB-1.", "a.hub.example.net:7422", "10.0.0.11", "[fd00::11]:6222", "fd00:0::11",
             "10.0.0.12", "hub.example.net", "a.b.hub.example.net", "", "10.0.0.12:4222"]
    messages = certs.problems(found, "hub-1", {"cert": "c.pem"}, names, 0)
    assert [m.split(" is not valid for ")[1].split(",")[0] for m in messages] == [
        "10.0.0.12", "hub.example.net", "a.b.hub.example.net"]
    assert "(it names DNS:hub-1, DNS:*.hub.example.net, IP:10.0.0.11, IP:fd00::11)" in messages[0]


def test_contents_given_are_named_as_the_files_the_caller_calls_them():
    found = {"problems": [{"file": "cert", "error": "the cert given does not verify against the ca given: x"}]}
    assert certs.problems(found, "h", {"cert": "files/h.pem (on the controller)", "ca": "/etc/ca.pem"}, [], 30) == [
        "h: files/h.pem (on the controller) does not verify against /etc/ca.pem: x"]
    assert certs.problems({}, "h", {}, ["x"], 30) == []  # not checked
