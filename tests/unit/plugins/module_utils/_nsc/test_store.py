"""The nsc store: layout, modes, atomic writes, read-back and consistency checks."""

import json
import os
import stat

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError, atomic_write


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path / "stores"), str(tmp_path / "keys"), "OP")


def operator_in(store, signing=False):
    op_seed = jwt.new_seed("operator")
    keys = []
    if signing:
        signing_seed = jwt.new_seed("operator")
        store.write_seed(signing_seed)
        keys = [jwt.public_key(signing_seed)]
    store.write_seed(op_seed)
    store.write_marker()
    store.write_operator(jwt.encode(jwt.operator_claims("OP", jwt.public_key(op_seed), signing_keys=keys), op_seed))
    return op_seed


def test_paths_follow_nscs_layout(store, tmp_path):
    seed = jwt.new_seed("account")
    public = jwt.public_key(seed)
    assert store.operator_jwt_path == str(tmp_path / "stores/OP/OP.jwt")
    assert store.marker_path == str(tmp_path / "stores/OP/.nsc")
    assert store.account_jwt_path("APP") == str(tmp_path / "stores/OP/accounts/APP/APP.jwt")
    assert store.user_jwt_path("APP", "u") == str(tmp_path / "stores/OP/accounts/APP/users/u.jwt")
    assert store.key_path(public) == str(tmp_path / "keys/keys/A" / public[1:3] / (public + ".nk"))
    assert store.creds_path("APP", "u") == str(tmp_path / "keys/creds/OP/APP/u.creds")


def test_marker_is_what_nsc_writes(store):
    store.write_marker()
    assert json.loads(open(store.marker_path).read()) == {"managed": False, "name": "OP", "kind": "operator",
                                                          "version": "1"}
    assert store.check_marker()


def test_marker_of_another_operator_is_refused(store):
    os.makedirs(store.root)
    with open(store.marker_path, "w") as handle:
        handle.write('{"name": "OTHER", "kind": "operator"}')
    with pytest.raises(StoreError, match="belongs to 'OTHER'"):
        store.check_marker()


def test_files_are_0600_in_0700_directories(store, tmp_path):
    seed = jwt.new_seed("user")
    store.write_seed(seed)
    store.write_creds("APP", "u", "creds")
    for path in (store.key_path(jwt.public_key(seed)), store.creds_path("APP", "u")):
        assert mode(path) == 0o600
        directory = os.path.dirname(path)
        while directory != str(tmp_path):
            assert mode(directory) == 0o700, directory
            directory = os.path.dirname(directory)


def test_atomic_write_never_loosens_a_mode(tmp_path):
    path = str(tmp_path / "f")
    atomic_write(path, "one")
    os.chmod(path, 0o400)
    atomic_write(path, "two")
    assert open(path).read() == "two" and mode(path) == 0o400
    assert os.listdir(str(tmp_path)) == ["f"]


def test_seeds_read_back_and_a_wrong_seed_is_refused(store):
    seed = jwt.new_seed("account")
    public = jwt.public_key(seed)
    assert store.read_seed(public) is None
    store.write_seed(seed)
    assert store.read_seed(public) == seed
    other = jwt.new_seed("account")
    atomic_write(store.key_path(public), other)
    with pytest.raises(StoreError, match="does not hold the seed"):
        store.read_seed(public)


def test_missing_operator_is_named(store):
    with pytest.raises(StoreError, match="operator 'OP' is not in the store"):
        store.read_operator()


def test_account_not_issued_by_the_operator_is_refused(store):
    operator_in(store)
    _token, op_claims = store.read_operator()
    stranger = jwt.new_seed("operator")
    seed = jwt.new_seed("account")
    claims = jwt.decode(jwt.encode(jwt.account_claims("APP", jwt.public_key(seed)), stranger))
    with pytest.raises(StoreError, match="neither operator 'OP' nor one of its signing keys"):
        store.check_account("APP", op_claims, claims)


def test_account_issued_by_a_signing_key_is_accepted(store):
    operator_in(store, signing=True)
    _token, op_claims = store.read_operator()
    signer = store.read_seed(op_claims["nats"]["signing_keys"][0])
    token = jwt.encode(jwt.account_claims("APP", jwt.public_key(jwt.new_seed("account"))), signer)
    store.write_account("APP", token)
    read_token, claims = store.read_account("APP")
    assert read_token == token
    store.check_account("APP", op_claims, claims)
    assert store.accounts() == ["APP"]


def test_account_file_naming_another_account_is_refused(store):
    op_seed = operator_in(store)
    _token, op_claims = store.read_operator()
    claims = jwt.decode(jwt.encode(jwt.account_claims("OTHER", jwt.public_key(jwt.new_seed("account"))), op_seed))
    with pytest.raises(StoreError, match="names account 'OTHER', not 'APP'"):
        store.check_account("APP", op_claims, claims)


def test_tampered_jwt_is_refused(store):
    op_seed = operator_in(store)
    token = jwt.encode(jwt.account_claims("APP", jwt.public_key(jwt.new_seed("account"))), op_seed)
    header, payload, signature = token.split(".")
    atomic_write(store.account_jwt_path("APP"), "%s.%s.%s" % (header, payload[:-4] + "AAAA", signature))
    with pytest.raises(StoreError, match="APP.jwt"):
        store.read_account("APP")


def test_user_validity_follows_the_accounts_keys(store):
    account_seed, signing_seed = jwt.new_seed("account"), jwt.new_seed("account")
    account = jwt.account_claims("APP", jwt.public_key(account_seed), signing_keys=[jwt.public_key(signing_seed)])
    user_pub = jwt.public_key(jwt.new_seed("user"))
    by_account = jwt.decode(jwt.encode(jwt.user_claims("u", user_pub), account_seed))
    by_signing = jwt.decode(jwt.encode(jwt.user_claims("u", user_pub, issuer_account=account["sub"]), signing_seed))
    assert store.check_user("APP", "u", account, by_account)
    assert store.check_user("APP", "u", account, by_signing)
    without_signing = jwt.account_claims("APP", account["sub"])
    assert not store.check_user("APP", "u", without_signing, by_signing)


def test_remove_account_takes_users_and_creds_but_keeps_seeds(store):
    op_seed = operator_in(store)
    seed = jwt.new_seed("account")
    store.write_seed(seed)
    store.write_account("APP", jwt.encode(jwt.account_claims("APP", jwt.public_key(seed)), op_seed))
    store.write_user("APP", "u", "x.y.z")
    store.write_creds("APP", "u", "creds")
    store.remove_account("APP")
    assert not os.path.exists(store.account_dir("APP")) and store.read_creds("APP", "u") is None
    assert store.read_seed(jwt.public_key(seed)) == seed


@pytest.mark.parametrize("name", ["has space", "a.b", "a/b", "*", ">", "", "..", "tab\t"])
def test_malformed_names_are_refused(tmp_path, name):
    with pytest.raises(StoreError, match="operator name"):
        Store(str(tmp_path), str(tmp_path), name)


def _files(*roots):
    out = {}
    for root in roots:
        for directory, dirs, files in os.walk(root):
            for name in dirs:
                out[os.path.join(directory, name)] = ("dir", mode(os.path.join(directory, name)))
            for name in files:
                path = os.path.join(directory, name)
                with open(path, "rb") as handle:
                    out[path] = (handle.read(), mode(path))
    return out


def test_a_snapshot_puts_the_operators_files_back_byte_for_byte(store):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Snapshot
    operator_in(store)
    store.write_creds("SYS", "sys", "creds")
    os.chmod(store.creds_path("SYS", "sys"), 0o400)
    before = _files(store.store_dir, store.keys_dir)
    snapshot = Snapshot(store)
    seed = jwt.new_seed("account")
    store.write_seed(seed)  # a new seed, in a directory of its own
    store.write_account("NEW", "x.y.z")
    store.write_creds("NEW", "u", "creds")
    store.write_creds("SYS", "sys", "other")
    snapshot.restore()
    assert _files(store.store_dir, store.keys_dir) == before
    assert not os.path.exists(store.key_path(jwt.public_key(seed)))

    kept = Snapshot(store)
    store.write_account("NEW", "x.y.z")
    kept.drop()
    assert os.path.exists(store.account_jwt_path("NEW"))
    assert sorted(os.listdir(store.store_dir)) == ["OP"] and "creds" in os.listdir(store.keys_dir)
    assert sorted(os.listdir(os.path.join(store.keys_dir, "creds"))) == ["OP"]


def test_a_snapshot_of_no_store_leaves_none(tmp_path):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Snapshot
    store = Store(str(tmp_path / "a" / "stores"), str(tmp_path / "b" / "keys"), "OP")
    os.makedirs(store.store_dir)  # as the lock makes it
    snapshot = Snapshot(store, made=[store.store_dir, os.path.dirname(store.store_dir)])
    operator_in(store)
    store.write_creds("SYS", "sys", "creds")
    snapshot.restore()
    assert os.listdir(str(tmp_path)) == []


def test_an_exclusive_lock_this_process_holds_is_taken_again_at_once(tmp_path):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import directory_lock
    with directory_lock(str(tmp_path), timeout=0):
        with directory_lock(str(tmp_path), timeout=0):
            with directory_lock(str(tmp_path), timeout=0, shared=True):
                pass
    with directory_lock(str(tmp_path), timeout=0, shared=True):
        with pytest.raises(StoreError, match="stayed locked"):
            # a shared lock is not this process's to take again exclusively: it waits, as for another run
            with directory_lock(str(tmp_path), timeout=0):
                pass
