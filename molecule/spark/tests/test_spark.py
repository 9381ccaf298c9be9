"""The pipeline on lab hosts: the job's Parquet output equals the plain-Python
aggregation of the hub stream (what the spokes sourced into it), invalid
telemetry is kept aside, the job ran on the cluster's workers and read as the
analytics account, and the services are hardened."""

import datetime as dt
import json
import math
import os

import pytest
import yaml

from pyspark_jetstream import reference
from pyspark_jetstream._nats import Connection

VENV = "/opt/nats-edge-spark/venv/bin/python"
OUTPUT = "/var/lib/jetstream-aggregate/output"


def members(group):
    """The scenario's hosts in an inventory group (the spark and spark-ci scenarios place Spark differently)."""
    with open(os.path.join(os.environ.get("MOLECULE_SCENARIO_DIRECTORY", "."), "molecule.yml")) as handle:
        return [p["name"] for p in yaml.safe_load(handle)["platforms"] if group in p.get("groups", [])]


HUB = members("hub")[0]
MASTER = members("spark_master")[0]
DRIVER = members("spark_driver")[0]
WORKERS = members("spark_workers")
CREDS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "fleet", "creds")
# the scenario's CA (molecule/shared/tls.yml), which the servers are verified with
CA = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "tls", "ca.pem")


def http_json(host, url):
    return json.loads(host.check_output(
        "python3 -c \"import urllib.request; print(urllib.request.urlopen('%s').read().decode())\"" % url))


def hub_messages(lab):
    address = lab[HUB].interface("eth0").addresses[0]
    with Connection(["nats://%s:4222" % address], creds=os.path.join(CREDS, "TELEMETRY", "edge.creds"), tls={"ca": CA},
                    timeout=10) as conn:
        return reference.stream_messages(conn, "telemetry")


def output_rows(host, kind):
    script = ("import json, pyarrow.dataset as ds; t = ds.dataset('%s/%s', format='parquet', partitioning='hive')"
              ".to_table(); print(json.dumps([{k: (v.isoformat() if hasattr(v, 'isoformat') else v) "
              "for k, v in r.items() if k != 'data'} for r in t.to_pylist()]))" % (OUTPUT, kind))
    return json.loads(host.check_output("%s -c \"%s\"" % (VENV, script)))


def test_the_output_matches_the_plain_python_aggregation(lab):
    messages = hub_messages(lab)
    # 2000 at prepare, 500 timed in side_effect, 100 after the job's user got a new key and the job restarted:
    # each counted once across that restart
    assert len(messages) == 2600
    rows, rejects = reference.compute(messages, 60)
    host = lab[DRIVER]
    state = json.loads(host.file(OUTPUT + "/_state.json").content_string)
    assert state["totals"]["messages"] == 2600 and state["totals"]["rejected"] == len(rejects) > 0
    got = {}
    for row in output_rows(host, "aggregates"):
        start = dt.datetime.fromisoformat(row["window_start"])
        got[(row["site"], row["metric"], int(start.timestamp()) * 1000000)] = row
    assert set(got) == set(rows)
    for key, want in rows.items():
        assert got[key]["count"] == want["count"] and got[key]["bytes"] == want["bytes"], key
        for name in ("sum", "min", "max", "avg", "lag_min", "lag_max", "lag_avg"):
            assert math.isclose(got[key][name], want[name], rel_tol=1e-9, abs_tol=1e-6), (key, name)
    rejected = output_rows(host, "rejects")
    assert sorted(r["seq"] for r in rejected) == sorted(seq for seq, _subject in rejects)
    assert all(r["reason"] and r["subject"].startswith("telemetry.spoke-") for r in rejected)


def test_the_job_runs_on_the_cluster_with_executors_on_every_worker(lab):
    master = http_json(lab[MASTER], "http://%s:8080/json/" % MASTER)
    assert master["aliveworkers"] == len(WORKERS)
    apps = [a for a in master["activeapps"] if a["name"] == "jetstream-aggregate"]
    assert len(apps) == 1, master["activeapps"]
    for name in WORKERS:
        worker = http_json(lab[name], "http://%s:8081/json/" % name)
        assert [e["appid"] for e in worker["executors"]] == [apps[0]["id"]], worker["executors"]


@pytest.mark.parametrize("name, unit", [(MASTER, "spark-master"), (DRIVER, "jetstream-aggregate")]
                         + [(name, "spark-worker") for name in WORKERS])
def test_services_run_hardened_as_spark(lab, name, unit):
    host = lab[name]
    assert host.service(unit).is_running and host.service(unit).is_enabled
    props = dict(line.split("=", 1) for line in host.check_output(
        "systemctl show %s -p NoNewPrivileges -p ProtectSystem -p PrivateTmp -p User" % unit).splitlines())
    assert props == {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes", "User": "spark"}


def test_the_job_reads_as_the_analytics_account(lab):
    host = lab[DRIVER]
    creds = host.file("/etc/jetstream-aggregate/reader.creds")
    assert creds.user == "spark" and creds.mode == 0o600
    with open(os.path.join(CREDS, "ANALYTICS", "spark.creds")) as handle:
        assert creds.content_string == handle.read()
    config = host.check_output("cat /etc/jetstream-aggregate/job.yml")
    assert "api_prefix: JS.TELEMETRY@hub.API" in config, config


def test_the_creds_and_config_are_private(lab):
    host = lab[DRIVER]
    config = host.file("/etc/jetstream-aggregate/job.yml")
    assert config.user == "root" and config.group == "spark" and config.mode == 0o640
    assert host.run("/opt/nats-edge-spark/venv/bin/jetstream-aggregate --check-config "
                    "/etc/jetstream-aggregate/job.yml").rc == 0
    assert host.run("runuser -u nobody -- cat /etc/jetstream-aggregate/job.yml").rc != 0
