import base64
import json

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt


def test_claims_are_signed_and_verified():
    op = jwt.new_seed("operator")
    acc = jwt.new_seed("account")
    token = jwt.encode(jwt.account_claims("A", jwt.public_key(acc)), op, issued_at=1700000000)
    header, _body, _signature = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"typ": "JWT", "alg": "ed25519-nkey"}
    claims = jwt.decode(token)
    assert claims["iss"] == jwt.public_key(op) and claims["sub"] == jwt.public_key(acc)
    assert claims["iat"] == 1700000000 and len(claims["jti"]) == 52
    assert claims["nats"]["type"] == "account" and claims["nats"]["version"] == 2


def test_a_tampered_jwt_is_refused():
    op = jwt.new_seed("operator")
    token = jwt.encode(jwt.account_claims("A", jwt.public_key(jwt.new_seed("account"))), op)
    header, body, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["name"] = "B"
    forged = "%s.%s.%s" % (header, base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode(),
                           signature)
    with pytest.raises(jwt.JWTError, match="signature does not match"):
        jwt.decode(forged)
    with pytest.raises(jwt.JWTError, match="not a JWT"):
        jwt.decode("abc")


def test_semantic_comparison_ignores_signing_time_and_order():
    op = jwt.new_seed("operator")
    acc = jwt.public_key(jwt.new_seed("account"))
    exports = [{"name": "a", "subject": "a.>", "type": "stream"}, {"name": "b", "subject": "b.>", "type": "service"}]
    one = jwt.decode(jwt.encode(jwt.account_claims("A", acc, exports=exports, signing_keys=["AX", "AB"]), op, 1))
    two = jwt.decode(jwt.encode(jwt.account_claims("A", acc, exports=exports[::-1], signing_keys=["AB", "AX"]), op, 2))
    assert one["jti"] != two["jti"]
    assert jwt.same_claims(one, two)
    three = jwt.decode(jwt.encode(jwt.account_claims("A", acc, exports=exports[:1]), op, 1))
    assert not jwt.same_claims(one, three)


def test_key_kinds():
    assert jwt.kind_of(jwt.new_seed("user")) == "user"
    assert jwt.kind_of(jwt.public_key(jwt.new_seed("operator"))) == "operator"
    with pytest.raises(jwt.JWTError):
        jwt.kind_of("NABC")


def test_creds_file_layout():
    text = jwt.creds("a.b.c", b"SUABC")
    assert text.splitlines()[:3] == ["-----BEGIN NATS USER JWT-----", "a.b.c", "------END NATS USER JWT------"]
    assert "-----BEGIN USER NKEY SEED-----\nSUABC\n------END USER NKEY SEED------" in text
