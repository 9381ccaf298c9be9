"""The alert rules of role nats_monitoring, rendered by ansible.builtin.template and checked by Debian's promtool.

The template is rendered twice by a playbook on localhost: with the role's defaults
(roles/nats_monitoring/defaults/main/alerts.yml) and with OVERRIDES on top. ``promtool check rules`` checks
both; every file in tests/integration/rules/ is a promtool unit test that runs beside the rule file it names.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, "roles", "nats_monitoring")
TEMPLATE = os.path.join(ROLE, "templates", "nats-fleet-rules.yml.j2")
DEFAULTS = os.path.join(ROLE, "defaults", "main", "alerts.yml")
RULE_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules")

RULES = "nats-fleet-rules.yml"
RULES_OVERRIDDEN = "nats-fleet-rules-overrides.yml"
# what rules/overrides.yml expects
OVERRIDES = {
    "nats_monitoring_source_lag_messages": 10,
    "nats_monitoring_source_lag_for": "1m",
    "nats_monitoring_server_down_for": "5m",
    "nats_monitoring_absent_hold": "3m",
    "nats_monitoring_stream_limit_ratio": 0.5,
    "nats_monitoring_expiry_days": 30,
    "nats_monitoring_source_lagging_severity": "critical",
}

# the alerts of the monitoring design, the one the rules add for a collector outage, and the outage budget's
CONTRACT = [
    "NatsSiteUnreachable", "NatsServerDown", "NatsServerUnhealthy", "NatsSourceLagging", "NatsSourceInactive",
    "NatsStreamStale", "NatsStreamNearLimit", "NatsJetStreamStorageNearLimit", "NatsCertificateExpiring",
    "NatsCredsExpiring", "NatsSlowConsumers", "NatsFleetDrift",
]
ALERTS = CONTRACT + ["NatsCollectorDown", "NatsOutageBudgetLow", "NatsOutageBudgetSpent"]


def _promtool():
    base = os.environ.get("PROMETHEUS_DEBIAN")
    if base:
        path = os.path.join(base, "usr", "bin", "promtool")
        if not os.access(path, os.X_OK):
            pytest.fail("PROMETHEUS_DEBIAN is set but %s is missing (make prometheus-tools unpacks it)" % path)
        return path
    path = shutil.which("promtool")
    if not path:
        pytest.skip("no promtool: PROMETHEUS_DEBIAN is unset and promtool is not on PATH "
                    "(make prometheus-tools unpacks Debian's)")
    return path


@pytest.fixture(scope="module")
def promtool():
    return _promtool()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """A directory with both renderings of the rules and a copy of every promtool test file."""
    out = tmp_path_factory.mktemp("alert-rules")
    play = [{
        "name": "Render the alert rules",
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "vars_files": [DEFAULTS],  # the role's defaults, as the role's own template task sees them
        "tasks": [
            {"name": "Rules with the defaults",
             "ansible.builtin.template": {"src": TEMPLATE, "dest": str(out / RULES), "mode": "0644"}},
            {"name": "Rules with overridden thresholds",
             "ansible.builtin.template": {"src": TEMPLATE, "dest": str(out / RULES_OVERRIDDEN), "mode": "0644"},
             "vars": OVERRIDES},  # task vars win over vars_files, as play or inventory vars win over role defaults
        ],
    }]
    (out / "render.yml").write_text(json.dumps(play, indent=1))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".collections"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-e", "ansible_python_interpreter=%s" % sys.executable, str(out / "render.yml")],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for path in glob.glob(os.path.join(RULE_TESTS, "*.yml")):
        shutil.copy(path, str(out))
    return out


def _run(promtool, cwd, *args):
    proc = subprocess.run([promtool] + list(args), cwd=str(cwd), capture_output=True, text=True, timeout=120,
                          check=False)
    return proc.returncode, proc.stdout + proc.stderr


def _load(path):
    with open(str(path)) as handle:
        return yaml.safe_load(handle)


def _rules(path):
    return {rule["alert"]: rule for group in _load(path)["groups"] for rule in group["rules"] if "alert" in rule}


@pytest.mark.parametrize("name", [RULES, RULES_OVERRIDDEN])
def test_promtool_checks_the_rendered_rules(promtool, rendered, name):
    code, output = _run(promtool, rendered, "check", "rules", name)
    assert code == 0 and "SUCCESS: %d rules found" % len(ALERTS) in output, output


UNIT_TESTS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(RULE_TESTS, "*.yml")))


@pytest.mark.parametrize("unit", UNIT_TESTS)
def test_promtool_unit_tests(promtool, rendered, unit):
    """Each alert fires when it should, stays silent just under its threshold and resolves."""
    code, output = _run(promtool, rendered, "test", "rules", unit)
    assert code == 0 and "SUCCESS" in output and "FAILED" not in output, output


def test_the_rules_have_every_alert_with_site_and_severity(rendered):
    for name in (RULES, RULES_OVERRIDDEN):
        rules = _rules(rendered / name)
        assert sorted(set(CONTRACT) - set(rules)) == [], name
        assert sorted(rules) == sorted(ALERTS), name
        for alert, rule in rules.items():
            assert rule["labels"]["severity"] in ("critical", "warning"), (name, alert)
            assert set(rule["annotations"]) >= {"summary", "description"}, (name, alert)
            # site comes from the series: the aggregation that gives the alert its labels (the left-most) keeps
            # it (the collector's alert sets it when missing); the unit tests see it on every alert that fires
            expr = rule["expr"]
            assert "without" not in expr, (name, alert)
            groupings = re.findall(r"\bby \(([^)]*)\)", expr)
            assert groupings and "site" in [label.strip() for label in groupings[0].split(",")], (name, alert)
            assert "{{ $labels.site }}" in rule["annotations"]["summary"] + rule["annotations"]["description"]
    assert _rules(rendered / RULES_OVERRIDDEN)["NatsSourceLagging"]["labels"]["severity"] == "critical"


def test_every_alert_has_a_unit_test_that_fires_and_one_that_stays_silent():
    fired, silent = {}, set()
    for unit in UNIT_TESTS:
        doc = _load(os.path.join(RULE_TESTS, unit))
        if doc["rule_files"] != [RULES]:
            continue
        for case in doc["tests"]:
            for check in case.get("alert_rule_test", []):
                if check.get("exp_alerts"):
                    fired.setdefault(check["alertname"], []).extend(check["exp_alerts"])
                else:
                    silent.add(check["alertname"])
    assert sorted(set(ALERTS) - set(fired)) == [], "alerts no test sees firing"
    assert sorted(set(ALERTS) - silent) == [], "alerts no test sees silent"
    for alert, expected in fired.items():
        for exp in expected:
            assert {"site", "severity"} <= set(exp["exp_labels"]), (alert, exp)
            assert {"summary", "description"} <= set(exp["exp_annotations"]), (alert, exp)


def test_a_changed_threshold_changes_when_the_alert_fires(promtool, rendered):
    """One input, both renderings: 11 messages behind fires only with the lowered lag threshold, and a silent
    server fires at 2m with the default and only at 5m with the longer nats_monitoring_server_down_for."""
    lag = ('nats_stream_source_lag_messages{site="spoke-1",server="spoke1-1",account="TEST",stream="cfg",'
           'source="cfg",source_site="hub",kind="mirror"}')
    down = 'nats_server_up{site="hub",server="hub-2"}'
    inputs = [{"series": lag, "values": "11x10"}, {"series": down, "values": "0x10"}]
    lag_labels = {"site": "spoke-1", "server": "spoke1-1", "account": "TEST", "stream": "cfg", "source": "cfg",
                  "source_site": "hub", "kind": "mirror"}
    down_labels = {"site": "hub", "server": "hub-2"}

    def case(rule_file, lag_fires_at, lag_severity, lag_over, down_fires_at, down_for):
        lagging = {"exp_labels": dict(lag_labels, severity=lag_severity), "exp_annotations": {
            "summary": "NATS mirror TEST/cfg at spoke-1 lags 11 messages",
            "description": "Stream cfg (account TEST, site spoke-1, leader spoke1-1) is 11 messages behind its mirror "
                           "cfg at site hub, more than %d for more than 1m." % lag_over}}
        silent = {"exp_labels": dict(down_labels, severity="critical"), "exp_annotations": {
            "summary": "NATS server hub-2 at site hub is down",
            "description": "Server hub-2 of site hub has not answered the collector for more than %s "
                           "(nats_server_up = 0)." % down_for}}
        checks = []
        for minute in range(0, 10):
            checks.append({"eval_time": "%dm" % minute, "alertname": "NatsSourceLagging", "exp_alerts":
                           [lagging] if lag_fires_at is not None and minute >= lag_fires_at else []})
            checks.append({"eval_time": "%dm" % minute, "alertname": "NatsServerDown", "exp_alerts":
                           [silent] if minute >= down_fires_at else []})
        doc = {"rule_files": [rule_file], "evaluation_interval": "1m",
               "tests": [{"interval": "1m", "input_series": inputs, "alert_rule_test": checks}]}
        path = rendered / ("changed-threshold-%s" % rule_file)
        path.write_text(json.dumps(doc, indent=1))
        return _run(promtool, rendered, "test", "rules", path.name)

    for code, output in (case(RULES, None, "warning", 1000, 2, "2m"),
                         case(RULES_OVERRIDDEN, 1, "critical", 10, 5, "5m")):
        assert code == 0 and "SUCCESS" in output, output
    # and the comparison is sharp: the defaults' timing against the overridden rules fails
    code, output = case(RULES_OVERRIDDEN, None, "warning", 10, 2, "5m")
    assert code != 0 and "FAILED" in output, output


# --- the series as the exporter emits them ---------------------------------------------------------------------

T0 = 1790000000.0
EXPORTER_CONFIG = {
    "collector_site": "hub",
    "servers": [{"server": "hub-1", "site": "hub"}, {"server": "spoke1-1", "site": "spoke-1"}],
    "leaf_links": [{"server": "spoke1-1", "site": "spoke-1", "account": "TEST"}],
    "accounts": {},
    "thresholds": {"hub/TEST/agg": {"max_age_seconds": 600}},
    "budgets": {"spoke-1/TEST/test": 600},  # its source silent for 400 s: over half of it
    "certificates": [{"server": "hub-1", "site": "hub", "not_after": T0 + 13 * 86400}],
    "creds": [{"account": "TEST", "user": "leaf", "site": "fleet", "expires": T0 + 86400}],
    "drift_file": "drift.prom",  # its text is handed in
}
DRIFT = ('nats_fleet_drift_hosts{stage="servers"} 1\n'
         'nats_fleet_drift_changes{stage="servers",site="hub",host="hub-1"} 2\n')
CONNECTED_UNTIL = 34  # minute of the last scrape that reaches the hub; none after it


def _answers(minute):
    """What the hub's server hub-1 answers at ``minute``; spoke1-1 (behind its cut leaf link) answers nothing."""
    server = {"name": "hub-1", "domain": "hub", "cluster": "hub", "ver": "2.9.10"}
    stream = {
        "name": "agg", "cluster": {"leader": "hub-1"},
        "state": {"messages": 10, "bytes": 1000, "last_ts": "2026-09-21T10:00:00Z"},  # long before T0
        "config": {"max_msgs": 11},
        "sources": [{"name": "test", "external": {"api": "$JS.spoke-1.API"}, "lag": 5000, "active": 400 * 10**9}],
    }
    return {
        "varz": {"hub-1": {"server": server, "data": {
            "slow_consumers": 3 if minute < 30 else 4, "mem": 1, "cpu": 1, "connections": 1}}},
        "healthz": {"hub-1": {"server": server, "data": {"status": "unavailable"}}},
        "leafz": {"hub-1": {"server": server, "data": {"leafs": []}}},
        "jsz": {"hub-1": {"server": server, "data": {
            "config": {"max_storage": 100}, "storage": 90, "memory": 0, "reserved_storage": 0,
            "account_details": [{"name": "TEST", "stream_detail": [stream]}]}}},
    }


class _Scrape(object):
    """A prometheus_client collector that hands out one collection's families."""

    def __init__(self, fams):
        self.fams = fams

    def collect(self):
        return iter(self.fams)


def _exporter_series(minutes):
    """input_series of promtool: each minute's scrape of the exporter's families, job and instance added as
    Prometheus adds them, a series missing from a scrape after it was seen marked stale as Prometheus marks it."""
    metrics = pytest.importorskip("nats_edge_monitor.metrics",
                                  reason="the exporter (monitoring/) is not installed in this virtualenv")
    collect = pytest.importorskip("nats_edge_monitor.collect")
    registry_module = pytest.importorskip("prometheus_client.registry")
    from prometheus_client import generate_latest  # pylint: disable=import-outside-toplevel
    from prometheus_client.parser import text_string_to_metric_families  # pylint: disable=import-outside-toplevel

    scrapes = []
    for minute in range(minutes):
        connected = minute <= CONNECTED_UNTIL
        snapshot = collect.Snapshot(connected, _answers(minute) if connected else None, started=T0 + 60 * minute)
        fams = metrics.families(snapshot, EXPORTER_CONFIG, T0 + 60 * minute, drift_text=DRIFT)

        registry = registry_module.CollectorRegistry()
        registry.register(_Scrape(fams))
        scrape = {}
        for family in text_string_to_metric_families(generate_latest(registry).decode()):
            for sample in family.samples:
                labels = dict(sample.labels, job="nats-fleet", instance="127.0.0.1:7777")
                key = "%s{%s}" % (sample.name, ",".join('%s="%s"' % item for item in sorted(labels.items())))
                scrape[key] = sample.value
        scrapes.append(scrape)
    series = []
    for key in sorted(set().union(*scrapes)):
        values, seen = [], False
        for scrape in scrapes:
            if key in scrape:
                values.append(repr(scrape[key]))
                seen = True
            else:
                values.append("stale" if seen else "_")
        series.append({"series": key, "values": " ".join(values)})
    return series


def test_the_rules_fire_on_the_exporters_own_series(promtool, rendered):
    """The exporter's families for a hub that sees its spoke cut off, then loses the hub (a collector outage):
    the alerts while it sees, the alerts held through the outage, and what is left after the hold."""
    series = _exporter_series(47)
    names = set(item["series"].split("{")[0] for item in series)
    assert "nats_server_slow_consumers_total" in names, sorted(names)

    stream = {"site": "hub", "server": "hub-1", "account": "TEST", "stream": "agg"}
    source = dict(stream, source="test", source_site="spoke-1", kind="source")
    seeing = [
        ("NatsServerDown", "critical", {"site": "spoke-1", "server": "spoke1-1"}),
        ("NatsSiteUnreachable", "critical", {"site": "spoke-1"}),
        ("NatsServerUnhealthy", "warning", {"site": "hub", "server": "hub-1"}),
        ("NatsStreamStale", "warning", stream),
        ("NatsStreamNearLimit", "warning", dict(stream, limit="messages")),
        ("NatsSourceLagging", "warning", source),
        ("NatsSourceInactive", "warning", source),
        ("NatsOutageBudgetLow", "warning", source),
        ("NatsJetStreamStorageNearLimit", "warning", {"site": "hub", "server": "hub-1"}),
        ("NatsSlowConsumers", "warning", {"site": "hub", "server": "hub-1"}),
    ]
    always = [  # from the exporter's config and the drift file: there through the outage
        ("NatsCertificateExpiring", "warning", {"site": "hub", "server": "hub-1"}),
        ("NatsCredsExpiring", "warning", {"site": "fleet", "account": "TEST", "user": "leaf"}),
        ("NatsFleetDrift", "warning", {"site": "hub", "stage": "servers"}),
    ]
    outage = [
        ("NatsCollectorDown", "critical", {"site": "fleet"}),
        ("NatsServerDown", "critical", {"site": "hub", "server": "hub-1"}),  # the collector site's servers are 0
    ]
    held = [alert for alert in seeing if alert[0] not in ("NatsServerUnhealthy", "NatsSlowConsumers")]

    def firing(alerts):
        return [{"labels": "ALERTS{%s}" % ",".join('%s="%s"' % item for item in sorted(
            dict(labels, alertname=name, alertstate="firing", severity=severity).items())), "value": 1}
            for name, severity, labels in alerts]

    doc = {"rule_files": [RULES], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series, "promql_expr_test": [
            {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "34m", "exp_samples": firing(seeing + always)},
            # 10 minutes into the outage: held, beside the outage's own alerts
            {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "44m", "exp_samples": firing(held + always + outage)},
            # past the hold: what is still known
            {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "46m", "exp_samples": firing(always + outage)},
        ]}]}
    path = rendered / "exporter-series.yml"
    path.write_text(json.dumps(doc, indent=1))
    code, output = _run(promtool, rendered, "test", "rules", path.name)
    assert code == 0 and "SUCCESS" in output, output
