"""Rows of the bad-input table (test_bad_input.py) for the nsc modules (operator, accounts, users, exports, the store)."""


def rows(table):
    """(id, module, arguments, message fragment) rows; ``table`` is test_bad_input, for its constants."""
    OPERATOR, ACCOUNT, USER, EXPORT, STORE, NSC_INFO = (table.OPERATOR, table.ACCOUNT, table.USER, table.EXPORT,
                                                        table.STORE, table.NSC_INFO)
    APP = table.APP_ACCOUNT  # as the store has it
    FRESH = {"name": "FRESH"}  # not in the store: written if anything were
    return [
        # -- the system account: neither replaced by a typo nor removed ----------------------------------------
        ("operator-system-account-typo", OPERATOR, dict(signing_key=True, system_account="APP"),
         "operator 'fleet': system_account 'APP' is not the operator's system account, which is 'SYS' ("),
        ("operator-system-account-unknown", OPERATOR, dict(signing_key=True, system_account="SYSS"),
         "set replace_system_account=true; else name the system account 'SYS'"),
        ("store-system-account-typo", STORE, dict(signing_key=True, system_account="APP", accounts=[FRESH]),
         "system_account 'APP' is not the operator's system account"),
        ("account-absent-system", ACCOUNT, dict(name="SYS", state="absent"),
         "account 'SYS' of operator 'fleet': 'SYS' is the system account of operator 'fleet'"),
        ("account-bulk-absent-system", ACCOUNT, dict(accounts=[FRESH, {"name": "SYS", "state": "absent"}]),
         "accounts[1] (SYS): account 'SYS' of operator 'fleet': it is the operator's system account"),
        ("store-account-absent-system", STORE, dict(signing_key=True, accounts=[APP, FRESH, {
            "name": "SYS", "state": "absent"}]), "accounts[2] (SYS): account 'SYS' of operator 'fleet': it is the "
                                                 "operator's system account; it is not removed"),
        # -- an item listed twice never converges --------------------------------------------------------------
        ("store-account-twice", STORE, dict(signing_key=True, accounts=[APP, FRESH, dict(APP, limits={"conn": 5})]),
         "accounts[2] (APP): listed twice, first at accounts[0]"),
        ("store-user-twice", STORE, dict(signing_key=True, accounts=[APP], users=[
            {"account": "APP", "name": "app"}, {"account": "APP", "name": "fresh"},
            {"account": "APP", "name": "app", "bearer_token": True}]), "users[2] (APP/app): listed twice, first at users[0]"),
        ("store-export-twice", STORE, dict(signing_key=True, exports=[
            {"account": "APP", "name": "e", "subject": "e.>"}, {"account": "APP", "name": "e", "subject": "e.x.>"}]),
         "exports[1] (APP e): listed twice, first at exports[0]"),
        ("account-bulk-twice", ACCOUNT, dict(accounts=[FRESH, dict(FRESH, limits={"conn": 1})]),
         "accounts[1] (FRESH): listed twice, first at accounts[0]"),
        ("user-bulk-twice", USER, dict(users=[{"account": "APP", "name": "fresh"},
                                              {"account": "APP", "name": "fresh", "expires_in": "1d"}]),
         "users[1] (APP/fresh): listed twice, first at users[0]"),
        ("export-bulk-twice", EXPORT, dict(exports=[{"account": "APP", "name": "e", "subject": "e.>"},
                                                    {"account": "APP", "name": "other", "subject": "e.>"}]),
         "exports[1] (APP other): listed twice, first at exports[0]"),
        ("export-bulk-share-twice", EXPORT, dict(exports=[
            {"share_stream": {"stream": "ORDERS", "from_account": "APP", "to_account": "OTHER"}},
            {"share_stream": {"stream": "ORDERS", "from_account": "APP", "to_account": "OTHER", "kind": "mirror"}}]),
         "exports[1] (share of ORDERS from APP to OTHER): listed twice, first at exports[0]"),
        # -- every item checked before the first file: the bad one last -----------------------------------------
        ("store-last-export-bad-subject", STORE, dict(signing_key=True, accounts=[APP, FRESH],
                                                      users=[{"account": "FRESH", "name": "f"}],
                                                      exports=[{"account": "FRESH", "name": "e", "subject": "e..x"}]),
         "exports[0] (FRESH e): operator 'fleet': export 'e' of account 'FRESH': subject: 'e..x' is not a subject"),
        ("store-last-user-unknown-account", STORE, dict(signing_key=True, accounts=[APP, FRESH], users=[
            {"account": "FRESH", "name": "f"}, {"account": "NOPE", "name": "u"}]),
         "users[1] (NOPE/u): user 'u' of account 'NOPE': account 'NOPE' is not in the store, nor made by an item"),
        ("store-user-of-a-removed-account", STORE, dict(signing_key=True, accounts=[{"name": "OTHER", "state": "absent"}],
                                                        users=[{"account": "OTHER", "name": "other"}]),
         "users[0] (OTHER/other): user 'other' of account 'OTHER': account 'OTHER' is removed by accounts[0]"),
        ("store-last-importer-unknown", STORE, dict(signing_key=True, accounts=[APP, FRESH], exports=[
            {"account": "FRESH", "name": "e", "subject": "e.>", "importers": [{"account": "APP"}, {"account": "NOPE"}]}]),
         "exports[0] (FRESH e): operator 'fleet': importers[1]: account 'NOPE' is not in the store"),
        ("store-last-share-unknown", STORE, dict(signing_key=True, accounts=[FRESH], exports=[
            {"share_stream": {"stream": "ORDERS", "from_account": "APP", "to_account": "NOWHERE"}}]),
         "share_stream.to_account: account 'NOWHERE' is not in the store"),
        ("store-last-user-expires-true", STORE, dict(signing_key=True, accounts=[APP, FRESH], users=[
            {"account": "FRESH", "name": "f"}, {"account": "APP", "name": "app", "expires": True}]),
         "users[1] (APP/app): user 'app' of account 'APP': expires: true is not a time"),
        ("store-last-account-limit-too-big", STORE, dict(signing_key=True, accounts=[
            FRESH, {"name": "BIG", "limits": {"data": "99999999T"}}]),
         "accounts[1] (BIG): account 'BIG' of operator 'fleet': limits.data: '99999999T' is larger than any server"),
        ("store-bad-service-url", STORE, dict(signing_key=True, accounts=[FRESH], service_urls=["not a url"]),
         "operator 'fleet': service_urls[0]: 'not a url' is not a URL"),
        ("user-bulk-last-unknown-account", USER, dict(users=[{"account": "APP", "name": "fresh"},
                                                             {"account": "NOPE", "name": "u"}]),
         "users[1] (NOPE/u): user 'u' of account 'NOPE': account 'NOPE' is not in the store"),
        ("export-bulk-last-bad-importer", EXPORT, dict(exports=[
            {"account": "APP", "name": "fresh", "subject": "fresh.>"},
            {"account": "APP", "name": "e", "subject": "e.>", "importers": [{"account": "APP"}]}]),
         "exports[1] (APP e): operator 'fleet': export 'e' of account 'APP': importers[0]: account 'APP' cannot import "
         "its own export"),
        # -- values coerced, or no server reads ----------------------------------------------------------------
        ("operator-true", OPERATOR, dict(operator=True), "operator: true is a boolean, not text"),
        ("store-operator-true", STORE, dict(operator=True), "operator: true is a boolean, not text"),
        ("nsc-info-operator-true", NSC_INFO, dict(operator=True), "operator: true is a boolean, not text"),
        ("account-name-false", ACCOUNT, dict(name=False), "name: false is a boolean, not text"),
        ("user-expires-true", USER, dict(account="APP", name="app", expires=True),
         "user 'app' of account 'APP': expires: true is not a time"),
        ("user-expires-negative", USER, dict(account="APP", name="app", expires=-5), "expires: -5 is before 1970"),
        ("user-expires-beyond-int64", USER, dict(account="APP", name="app", expires=2 ** 63),
         "expires: 9223372036854775808 is later than any server reads"),
        ("account-limit-beyond-int64", ACCOUNT, dict(name="APP", limits={"conn": 2 ** 63}),
         "limits.conn: 9223372036854775808 is larger than any server reads"),
        ("account-js-beyond-int64", ACCOUNT, dict(name="APP", jetstream={"disk_storage": "99999999T"}),
         "jetstream.disk_storage: '99999999T' is larger than any server reads"),
        ("account-limit-true", ACCOUNT, dict(name="APP", limits={"conn": True}),
         "limits.conn: true is a boolean, not a number"),
        ("account-jetstream-true", ACCOUNT, dict(name="APP", jetstream=True),
         "jetstream: true is not a mapping; write jetstream: {{}} for JetStream without limits"),
        ("account-bulk-jetstream-true", ACCOUNT, dict(accounts=[FRESH, {"name": "APP", "jetstream": True}]),
         "accounts[1] (APP): jetstream: true is not a mapping"),
        ("store-jetstream-true", STORE, dict(signing_key=True, accounts=[FRESH, {"name": "APP", "jetstream": True}]),
         "accounts[1] (APP): jetstream: true is not a mapping"),
        ("operator-service-url-words", OPERATOR, dict(signing_key=True, service_urls=["not a url"]),
         "service_urls[0]: 'not a url' is not a URL a server or nsc can use"),
        ("operator-service-url-http", OPERATOR, dict(signing_key=True, service_urls=["http://hub-1:8222"]),
         "service_urls[0]: 'http://hub-1:8222' is not a URL a server or nsc can use"),
        ("operator-account-server-url-words", OPERATOR, dict(signing_key=True, account_server_url="somewhere"),
         "account_server_url: 'somewhere' is not a URL"),
        ("user-resp-max-negative", USER, dict(account="APP", name="app", permissions={"resp": {"max": -5}}),
         "permissions.resp.max: -5: use the number of replies allowed per request"),
        ("account-resp-max-negative", ACCOUNT, dict(name="APP", default_permissions={"resp": {"max": -5}}),
         "default_permissions.resp.max: -5"),
        ("user-allow-true", USER, dict(account="APP", name="app", permissions={"pub": {"allow": [True]}}),
         "permissions.pub.allow[0]: true is a boolean, not text"),
        ("export-importer-self", EXPORT, dict(account="APP", name="e", subject="e.>", importers=[{"account": "APP"}]),
         "account 'APP' cannot import its own export"),
        # -- account and user policy ---------------------------------------------------------------------------
        ("account-tiers-and-flat", ACCOUNT, dict(name="APP", jetstream={"disk_storage": "1GiB", "tiers": {
            "R1": {"streams": 1}}}), "account 'APP' of operator 'fleet': jetstream: tiers cannot be combined with "
                                     "disk_storage"),
        ("account-tier-cap-words", ACCOUNT, dict(name="APP", jetstream={"tiers": {"R1": {
            "disk_max_stream_bytes": "lots"}}}), "jetstream.tiers.R1.disk_max_stream_bytes: "),
        ("account-tier-unknown", ACCOUNT, dict(name="APP", jetstream={"tiers": {"R2": {}}}), "R2"),
        ("account-max-bytes-required-words", ACCOUNT, dict(name="APP", jetstream={"max_bytes_required": "always"}),
         "max_bytes_required"),
        ("account-mapping-weights", ACCOUNT, dict(name="APP", mappings=[{"subject": "a", "to": [
            {"subject": "x", "weight": 70}, {"subject": "y", "weight": 40}]}]),
         "mappings[0] (a): the weights of the destinations add up to 110%"),
        ("account-mapping-subject", ACCOUNT, dict(name="APP", mappings=[{"subject": "a..b", "to": [{"subject": "x"}]}]),
         "mappings[0].subject: 'a..b' is not a subject"),
        ("account-scoped-role-twice", ACCOUNT, dict(name="APP", scoped_signing_keys=[{"role": "r"}, {"role": "r"}]),
         "scoped_signing_keys[1] (r): role 'r' is listed twice"),
        ("account-scoped-template-src", ACCOUNT, dict(name="APP", scoped_signing_keys=[
            {"role": "r", "template": {"src": ["nowhere"]}}]),
         "scoped_signing_keys[0] (r).template.src: 'nowhere' is not a network in CIDR notation"),
        ("user-connection-type-unknown", USER, dict(account="APP", name="app", allowed_connection_types=["CLIENT"]),
         "user 'app' of account 'APP': allowed_connection_types: 'CLIENT' is not a connection type; use STANDARD"),
        ("user-src-without-prefix", USER, dict(account="APP", name="app", src=["10.0.0.1"]),
         "src: '10.0.0.1' is not a network in CIDR notation"),
        ("user-role-and-permissions", USER, dict(account="APP", name="app", signing_role="reader",
                                                 permissions={"pub": {"allow": ["x"]}}),
         "signing_role: a user issued with the scoped signing key of role 'reader' gets its permissions and limits "
         "from the key's template; permissions cannot be given too"),
        ("user-role-unknown", USER, dict(account="APP", name="app", signing_role="nope"),
         "signing_role: account 'APP' has no scoped signing key of role 'nope' (it has none)"),
        ("store-user-bad-src", STORE, dict(signing_key=True, accounts=[APP], users=[
            {"account": "APP", "name": "app", "src": ["10.0.0.0/99"]}]),
         "users[0] (APP/app): user 'app' of account 'APP': src: '10.0.0.0/99' is not a network"),
        ("store-account-mapping-twice", STORE, dict(signing_key=True, accounts=[FRESH, dict(APP, mappings=[
            {"subject": "a", "to": [{"subject": "x"}]}, {"subject": "a", "to": [{"subject": "y"}]}])]),
         "accounts[1] (APP): account 'APP' of operator 'fleet': mappings[1] (a): subject 'a' is mapped twice"),
    ]
