# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NATS JWTs (operator, account, user) and nkeys. Private to the collection.

Encodes and verifies the v2 claims nats-server reads, on top of the
``nkeys`` library (imported lazily). Claims compare semantically: issue
time, ID and the order of set-like lists never make two JWTs differ.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import time
import traceback

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError

NKEYS = "nkeys"
_IMPORT_ERROR = None
try:
    import nkeys
except ImportError:  # pragma: no cover - exercised by the missing-library test
    nkeys = None
    _IMPORT_ERROR = traceback.format_exc()

HEADER = {"typ": "JWT", "alg": "ed25519-nkey"}
KINDS = {"operator": "O", "account": "A", "user": "U"}

# Lists whose order means nothing to the server.
_SET_LIKE = {"signing_keys", "tags", "allow", "deny", "operator_service_urls", "src",
             "allowed_connection_types"}
# Claims that change on every signing.
_VOLATILE = {"jti", "iat"}


class JWTError(NatsEdgeError, ValueError):
    pass


def _require():
    if nkeys is None:
        raise JWTError("the Python library %s is required (pip install %s)" % (NKEYS, NKEYS))


def _prefix(kind):
    return {"operator": nkeys.PREFIX_BYTE_OPERATOR, "account": nkeys.PREFIX_BYTE_ACCOUNT,
            "user": nkeys.PREFIX_BYTE_USER}[kind]


def new_seed(kind):
    """A fresh seed (bytes, e.g. b'SOA...') for an operator, account or user key."""
    _require()
    return nkeys.encode_seed(os.urandom(32), _prefix(kind))


def public_key(seed):
    _require()
    return nkeys.from_seed(_bytes(seed)).public_key.decode()


def kind_of(key):
    """'operator', 'account' or 'user' from a public key or seed."""
    key = key.decode() if isinstance(key, bytes) else key
    letter = key[1] if key.startswith("S") else key[0]
    for kind, prefix in KINDS.items():
        if prefix == letter:
            return kind
    raise JWTError("%s... is not an operator, account or user key" % key[:4])


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _bytes(value):
    return value if isinstance(value, bytes) else value.encode()


def encode(claims, signer_seed, issued_at=None):
    """Sign ``claims`` (without jti/iat) with ``signer_seed``; returns the JWT."""
    _require()
    signer = nkeys.from_seed(_bytes(signer_seed))
    body = copy.deepcopy(claims)
    body["iat"] = int(issued_at if issued_at is not None else time.time())
    body["iss"] = signer.public_key.decode()
    body["jti"] = ""
    digest = hashlib.sha512(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).digest()[:32]
    body["jti"] = base64.b32encode(digest).decode().rstrip("=")
    signing_input = "%s.%s" % (_b64(json.dumps(HEADER, separators=(",", ":")).encode()),
                               _b64(json.dumps(body, separators=(",", ":")).encode()))
    return "%s.%s" % (signing_input, _b64(signer.sign(signing_input.encode())))


def decode(token, verify=True):
    """Claims of a JWT; with ``verify`` the signature must match its issuer."""
    try:
        header_b64, body_b64, signature_b64 = token.strip().split(".")
        header = json.loads(_unb64(header_b64))
        claims = json.loads(_unb64(body_b64))
    except (ValueError, TypeError):
        raise JWTError("not a JWT")
    if header.get("alg") not in ("ed25519-nkey", "ed25519"):
        raise JWTError("unsupported JWT algorithm %r" % header.get("alg"))
    if verify:
        _require()
        issuer = claims.get("iss", "")
        if not _verify(issuer, ("%s.%s" % (header_b64, body_b64)).encode(), _unb64(signature_b64)):
            raise JWTError("the signature does not match issuer %s" % (issuer or "(none)"))
    return claims


def _verify(public, data, signature):
    import nacl.signing
    import nacl.exceptions
    try:
        raw = base64.b32decode(public + "=" * (-len(public) % 8))
        # prefix byte, 32 key bytes, crc16
        if len(raw) != 35 or not nkeys.valid_public_prefix_byte(raw[0]):
            return False
        nacl.signing.VerifyKey(raw[1:33]).verify(data, signature)
        return True
    except (ValueError, TypeError, nacl.exceptions.BadSignatureError):
        return False


def semantic(claims):
    """The claims with what changes on every signing removed and set-like
    lists sorted, for comparing what a JWT says rather than how."""
    def walk(value, key=None):
        if isinstance(value, dict):
            return {k: walk(v, k) for k, v in value.items() if k not in _VOLATILE}
        if isinstance(value, list):
            items = [walk(v) for v in value]
            if key in _SET_LIKE or key in ("exports", "imports"):
                return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
            return items
        return value
    return walk(claims)


def same_claims(a, b):
    return semantic(a) == semantic(b)


# --------------------------------------------------------------------------
# claim bodies


def operator_claims(name, subject, signing_keys=(), system_account=None, service_urls=(),
                    account_server_url=None, strict_signing_key_usage=False):
    nats = {"type": "operator", "version": 2}
    if signing_keys:
        nats["signing_keys"] = sorted(signing_keys)
    if system_account:
        nats["system_account"] = system_account
    if service_urls:
        nats["operator_service_urls"] = list(service_urls)
    if account_server_url:
        nats["account_server_url"] = account_server_url
    if strict_signing_key_usage:
        nats["strict_signing_key_usage"] = True
    return {"name": name, "sub": subject, "nats": nats}


UNLIMITED_ACCOUNT = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                     "wildcards": True, "conn": -1, "leaf": -1}


def signing_key_id(value):
    """The public key of an entry of ``signing_keys``: a key, or a scoped key (an object with ``key``)."""
    return value.get("key") if isinstance(value, dict) else value


def plain_signing_keys(claims):
    """The unscoped signing keys of operator or account claims (a scoped key only issues users, with its template)."""
    return [key for key in ((claims or {}).get("nats") or {}).get("signing_keys") or [] if isinstance(key, str)]


def scoped_signing_keys(claims):
    """The scoped signing keys of account claims: objects with kind, key, role, template and description."""
    return [key for key in ((claims or {}).get("nats") or {}).get("signing_keys") or [] if isinstance(key, dict)]


def account_claims(name, subject, jetstream=None, limits=None, signing_keys=(), exports=(), imports=(),
                   default_permissions=None, description=None, mappings=None):
    """``jetstream``: {disk_storage, mem_storage, streams, consumer, ...} (-1 unlimited), or {tiered_limits: {R1:
    {...}}}; None leaves JetStream disabled for the account. ``signing_keys``: keys and scoped keys (objects);
    ``mappings``: {subject: [{subject, weight, cluster}]}."""
    account_limits = dict(UNLIMITED_ACCOUNT)
    account_limits.update(limits or {})
    if jetstream:
        account_limits.update(jetstream)
    nats = {"limits": account_limits, "type": "account", "version": 2,
            "default_permissions": default_permissions or {"pub": {}, "sub": {}}}
    if signing_keys:
        nats["signing_keys"] = sorted(signing_keys, key=signing_key_id)
    if mappings:
        nats["mappings"] = mappings
    if exports:
        nats["exports"] = list(exports)
    if imports:
        nats["imports"] = list(imports)
    if description:
        nats["description"] = description
    return {"name": name, "sub": subject, "nats": nats}


def user_claims(name, subject, issuer_account=None, permissions=None, bearer_token=False,
                limits=None, expires=None, scoped=False):
    """A user's claims; ``limits`` may hold src and allowed_connection_types. A ``scoped`` user (issued with a
    scoped signing key) has no permissions or limits of its own: the key's template gives them."""
    nats = {"type": "user", "version": 2} if scoped else {
        "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2}
    for key, value in (permissions or {}).items():
        nats[key] = value
    nats.update(limits or {})
    if bearer_token:
        nats["bearer_token"] = True
    if issuer_account:
        nats["issuer_account"] = issuer_account
    claims = {"name": name, "sub": subject, "nats": nats}
    if expires:
        claims["exp"] = int(expires)
    return claims


def creds(user_jwt, user_seed):
    """The text of a .creds file (JWT and seed), as nsc writes it."""
    seed = user_seed.decode() if isinstance(user_seed, bytes) else user_seed
    return ("-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n"
            "NKEYs are sensitive and should be treated as secrets.\n\n"
            "-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n\n"
            "*************************************************************\n") % (user_jwt, seed)


_CREDS_BLOCK = re.compile(r"-{3,}BEGIN ([A-Z ]+)-{3,}\s*\n\s*(\S+)\s*\n\s*-{3,}END \1-{3,}")


def parse_creds(text):
    """(user JWT, seed) of the text of a .creds file; JWTError (never quoting
    the text, which holds a seed) when either is missing or malformed."""
    blocks = dict((kind, value) for kind, value in _CREDS_BLOCK.findall(text or ""))
    token = blocks.get("NATS USER JWT")
    seed = blocks.get("USER NKEY SEED")
    if not token or not seed:
        raise JWTError("not a NATS creds file (it needs a 'BEGIN NATS USER JWT' and a 'BEGIN USER NKEY SEED' block)")
    try:
        claims = decode(token, verify=False)
    except JWTError:
        raise JWTError("a creds file whose user JWT is malformed")
    try:
        check_seed(seed, "user")
    except JWTError as exc:
        raise JWTError("a creds file whose seed is no good: %s" % exc)
    return token, claims, seed


def check_seed(seed, kind=None):
    """The public key of a seed; JWTError (without the seed) when it is not one."""
    _require()
    try:
        public = nkeys.from_seed(_bytes(seed.strip() if isinstance(seed, str) else seed.strip())).public_key.decode()
    except Exception:  # nkeys raises its own error types, and binascii/ValueError on garbage
        raise JWTError("not a valid nkey seed")
    if kind and kind_of(public) != kind:
        raise JWTError("the seed is of an %s key, not a %s key" % (kind_of(public), kind))
    return public
