"""The operator's options checked before the store is read (check_options), and its system account neither replaced
by a typo nor removed, on stores written in tmp dirs with the collection's own code."""

import pytest
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.nats_edge.fleet.plugins.module_utils._errors import NatsEdgeError
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc import account, bulk, operator
from ansible_collections.nats_edge.fleet.plugins.module_utils._nsc.store import Store, StoreError


def params(spec, **given):
    result = ArgumentSpecValidator(spec).validate(given)
    assert not result.error_messages, result.error_messages
    return result.validated_parameters


# -- each kind's checks -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("given, message", [
    (dict(operator="my op"), "operator name: 'my op' is not a valid name"),
    (dict(system_account="S.Y"), "system account name: 'S.Y'"),
    (dict(service_urls=["not a url"]), "service_urls[0]: 'not a url' is not a URL a server or nsc can use: write "
                                       "nats:// or tls://"),
    (dict(service_urls=["nats://hub-1:4222", "http://hub-1:8222"]), "service_urls[1]: 'http://hub-1:8222' is not"),
    (dict(service_urls=["nats://alice:secret@hub-1:4222"]), "service_urls[0]: 'nats://***@hub-1:4222' holds "
                                                            "credentials"),
    (dict(service_urls=["nats://hub-1:4222/x"]), "service_urls[0]: 'nats://hub-1:4222/x' has a path"),
    (dict(service_urls=["nats://hub-1:port"]), "service_urls[0]: 'nats://hub-1:port' is not a URL"),
    (dict(account_server_url="hub-1:9090"), "account_server_url: 'hub-1:9090' is not a URL a server or nsc can use")])
def test_the_operators_options_are_checked(given, message):
    with pytest.raises(StoreError) as caught:
        operator.check_options(params(operator.ARGUMENT_SPEC, **dict(dict(operator="fleet"), **given)))
    assert str(caught.value).startswith(message), str(caught.value)


def test_good_operator_options_pass():
    good = params(operator.ARGUMENT_SPEC, operator="fleet", service_urls=["nats://hub-1:4222", "tls://10.0.0.1"],
                  account_server_url="https://hub-1:9090/jwt/v1")
    assert operator.check_options(good) is good
    operator.check_options(params(operator.ARGUMENT_SPEC, operator="fleet", account_server_url=""))


# -- the system account, on a store ------------------------------------------------------------------------------


@pytest.fixture
def dirs(tmp_path):
    where = dict(store_dir=str(tmp_path / "stores"), keys_dir=str(tmp_path / "keys"))
    operator.converge(bulk.Run(params(operator.ARGUMENT_SPEC, operator="fleet", **where)))
    account.converge(bulk.Run(params(account.ARGUMENT_SPEC, operator="fleet", name="APP", **where)))
    return where


def snapshot(dirs):
    import hashlib
    import os
    digest = hashlib.sha256()
    for root in (dirs["store_dir"], dirs["keys_dir"]):
        for directory, subdirs, files in sorted(os.walk(root)):
            subdirs.sort()
            for name in sorted(files):
                with open(os.path.join(directory, name), "rb") as handle:
                    digest.update(name.encode() + handle.read())
    return digest.hexdigest()


def test_a_typo_in_system_account_does_not_replace_it(dirs):
    before = snapshot(dirs)
    store = Store(dirs["store_dir"], dirs["keys_dir"], "fleet")
    sys_id = store.read_account("SYS")[1]["sub"]
    for name in ("APP", "SYSS"):
        with pytest.raises(NatsEdgeError) as caught:
            operator.converge(bulk.Run(params(operator.ARGUMENT_SPEC, operator="fleet", system_account=name, **dirs)))
        message = str(caught.value)
        assert message.startswith("operator 'fleet': system_account %r is not the operator's system account, which is "
                                  "'SYS' (%s)" % (name, sys_id)), message
        assert "set replace_system_account=true; else name the system account 'SYS'" in message, message
    assert snapshot(dirs) == before


def test_replacing_the_system_account_says_what_the_servers_need(dirs):
    run = bulk.Run(params(operator.ARGUMENT_SPEC, operator="fleet", system_account="APP", replace_system_account=True,
                          **dirs))
    store = Store(dirs["store_dir"], dirs["keys_dir"], "fleet")
    old, new = store.read_account("SYS")[1]["sub"], store.read_account("APP")[1]["sub"]
    result = operator.converge(run)
    assert result["changed"] and result["system_account_id"] == new
    assert result["system_account_replaced"] == dict(previous="SYS", previous_id=old, name="APP", account_id=new,
                                                     msg=run.warnings[0])
    assert ("the system account is now 'APP' (%s), replacing 'SYS' (%s). Every server of the operator must be "
            "reconfigured with system_account %s" % (new, old, new)) in run.warnings[0]
    assert "restarted" in run.warnings[0]
    assert store.read_operator()[1]["nats"]["system_account"] == new
    again = bulk.Run(params(operator.ARGUMENT_SPEC, operator="fleet", system_account="APP", **dirs))
    assert "system_account_replaced" not in operator.converge(again) and not again.warnings


def test_the_system_account_is_not_removed(dirs):
    before = snapshot(dirs)
    sys_id = Store(dirs["store_dir"], dirs["keys_dir"], "fleet").read_account("SYS")[1]["sub"]
    with pytest.raises(NatsEdgeError) as caught:
        account.converge(bulk.Run(params(account.ARGUMENT_SPEC, operator="fleet", name="SYS", state="absent", **dirs)))
    assert str(caught.value).startswith("account 'SYS' of operator 'fleet': 'SYS' is the system account of operator "
                                        "'fleet' (%s); it is not removed" % sys_id), str(caught.value)
    assert caught.value.result["changed"] is False
    assert snapshot(dirs) == before
    removed = account.converge(bulk.Run(params(account.ARGUMENT_SPEC, operator="fleet", name="APP", state="absent",
                                               **dirs)))
    assert removed["changed"]


def test_a_lost_system_account_is_not_made_anew_with_a_key_no_server_knows(dirs):
    import os
    store = Store(dirs["store_dir"], dirs["keys_dir"], "fleet")
    sys_id = store.read_account("SYS")[1]["sub"]
    os.remove(store.account_jwt_path("SYS"))  # nsc, or a hand, removed it
    with pytest.raises(NatsEdgeError) as caught:
        operator.converge(bulk.Run(params(operator.ARGUMENT_SPEC, operator="fleet", **dirs)))
    message = str(caught.value)
    assert ("system_account 'SYS' is not the operator's system account, which is %s (no account of the store has "
            "that key any more): this run would make a new account 'SYS' (a new key) the system account" % sys_id
            ) in message, message
    assert message.endswith("else bring the system account's JWT back into the store (accounts/<name>/<name>.jwt, "
                            "issued to %s)" % sys_id), message
    assert store.read_account("SYS") == (None, None)
