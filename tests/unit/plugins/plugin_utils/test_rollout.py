"""The order a rollout takes and the knobs it checks (plugin_utils._rollout)."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.plugin_utils import _rollout as ro


def test_hub_goes_one_by_one_with_the_meta_leader_last():
    hub = {"hub-1": "hub", "hub-2": "hub", "hub-3": "hub"}
    assert ro.rollout_order(["hub-1", "hub-2", "hub-3"], hub, ["hub-1"]) == ["hub-2", "hub-3", "hub-1"]
    assert ro.rollout_order(["hub-1", "hub-2", "hub-3"], hub, []) == ["hub-1", "hub-2", "hub-3"]


def test_unhealthy_nodes_go_first():
    # a node that is down cannot get worse; the others' turn would fail their pre-gate while it is down
    hub = {"hub-1": "hub", "hub-2": "hub", "hub-3": "hub"}
    order = ro.rollout_order(["hub-1", "hub-2", "hub-3"], hub, ["hub-2"], first=["hub-3"])
    assert order == ["hub-3", "hub-1", "hub-2"]


def test_edges_are_grouped_by_site_in_inventory_order():
    sites = {"a1": "a", "b1": "b", "a2": "a", "c1": "c"}
    assert ro.rollout_order(["a1", "b1", "a2", "c1"], sites) == ["a1", "a2", "b1", "c1"]


def test_rounds_put_the_nodes_of_a_site_one_after_another():
    sites = {"a1": "a", "a2": "a", "a3": "a", "b1": "b", "c1": "c", "c2": "c"}
    assert ro.rollout_rounds(["a1", "a2", "a3", "b1", "c1", "c2"], sites) == {
        "a1": 0, "a2": 1, "a3": 2, "b1": 0, "c1": 0, "c2": 1}


@pytest.mark.parametrize("canaries, expected", [
    (["c"], ["c1", "a1", "a2", "b1"]),
    (["b1", "c"], ["b1", "c1", "a1", "a2"]),  # a host stands for its site
    (["a2", "a"], ["a1", "a2", "b1", "c1"]),  # a site named twice goes once
    (["zz"], ["a1", "a2", "b1", "c1"]),  # a site not in this rollout (offline, or left out) is no matter
])
def test_canary_sites_go_first_in_the_order_named(canaries, expected):
    sites = {"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
    assert ro.rollout_order(["a1", "b1", "a2", "c1"], sites, canaries=canaries) == expected


def test_canaries_given_as_a_string_are_the_names_it_separates_with_commas():
    sites = {"a1": "a", "a2": "a", "b1": "b", "c1": "c"}
    assert ro.rollout_order(["a1", "b1", "a2", "c1"], sites, canaries="c") == ["c1", "a1", "a2", "b1"]
    assert ro.rollout_order(["a1", "b1", "a2", "c1"], sites, canaries="b1, c") == ["b1", "c1", "a1", "a2"]
    assert ro.name_list(None) == [] and ro.name_list("") == [] and ro.name_list(("x",)) == ["x"]
    with pytest.raises(TypeError):
        ro.name_list({"c": True})


# -- the rollout's knobs -----------------------------------------------------------------------------------------

GROUPS = {"all": ["hub-1", "hub-2", "s1", "s2a", "s2b"], "ungrouped": [], "hub": ["hub-1", "hub-2"],
          "nats_servers": ["hub-1", "hub-2", "s1", "s2a", "s2b"]}
DOMAINS = {"hub-1": "hub", "hub-2": "hub", "s1": "", "s2a": "site2", "s2b": "site2"}
WAVE = "a wave size is a whole number of edge hosts from 1 (such as 2) or a percentage of them from 1% to 100%"


def problems(**knobs):
    return ro.knob_problems({"hub-1": knobs, "s1": knobs}, GROUPS, DOMAINS)


@pytest.mark.parametrize("knobs", [
    {},  # the defaults
    dict(nats_rollout_edge_batches=[1, 2, "25%", "100%"], nats_rollout_canaries=["site2", "s1"]),
    dict(nats_rollout_edge_batches=["2", 3.0, " 50 %"], nats_rollout_canaries=None),  # as Ansible reads serial
    dict(nats_rollout_edge_batches=2), dict(nats_rollout_edge_batches="10%"),  # one size
    dict(nats_rollout_canaries="site2,s1"),  # the list type's string form
    dict(nats_rollout_max_fail_percentage=0), dict(nats_rollout_max_fail_percentage="100"),
    dict(nats_rollout_max_fail_percentage="12.5%"), dict(nats_rollout_max_fail_percentage=33.3),
    dict(nats_rollout_gate_timeout="90", nats_rollout_max_lag="0", nats_rollout_lame_duck="no",
         nats_rollout_only_outdated="yes"),
    dict(nats_rollout_lame_duck=0, nats_rollout_only_outdated="True"),
    dict(nats_rollout_downgrade_check=False), dict(nats_rollout_downgrade_check="yes"),
    dict(nats_rollout_report_file=None), dict(nats_rollout_report_file="/tmp/rollout.json"),
    dict(nats_fleet_hub_group="hub"),
    dict(_names=["nats_rollout_canaries", "nats_rollout_my_own_note"]),  # a name not near a setting is the user's
])
def test_knobs_that_are_right_pass(knobs):
    assert problems(**knobs) == []


def test_a_fleet_without_a_hub_group_is_all_edge_sites():
    groups = {"all": ["s1", "s2"], "nats_servers": ["s1", "s2"]}
    assert ro.knob_problems({"s1": {"nats_rollout_canaries": ["s2"]}}, groups, {}) == []


@pytest.mark.parametrize("knobs, expected", [
    (dict(nats_rollout_canaries=["site7"]),
     "nats_rollout_canaries[0]: 'site7' is not an edge site or host of the inventory (did you mean site2?); the edge "
     "sites (and their hosts) are: s1, site2 (s2a, s2b)"),
    (dict(nats_rollout_canaries=["s1", "s2c"]),
     "nats_rollout_canaries[1]: 's2c' is not an edge site or host of the inventory (did you mean s2a or s2b?)"),
    (dict(nats_rollout_canaries=["hub-2"]), "nats_rollout_canaries[0]: 'hub-2' is in the hub (group hub)"),
    (dict(nats_rollout_canaries=["hub"]), "nats_rollout_canaries[0]: 'hub' is in the hub (group hub)"),
    (dict(nats_rollout_canaries=[7]), "nats_rollout_canaries[0]: 7: a site or host name is text: write it in quotes"),
    (dict(nats_rollout_canaries={"site2": True}), "nats_rollout_canaries: {'site2': True}: give a list of edge sites"),
    (dict(nats_rollout_edge_batches=[0]), "nats_rollout_edge_batches[0]: 0: " + WAVE),
    (dict(nats_rollout_edge_batches=["abc"]), "nats_rollout_edge_batches[0]: 'abc': " + WAVE),
    (dict(nats_rollout_edge_batches=[1, "0%"]), "nats_rollout_edge_batches[1]: '0%': " + WAVE),
    (dict(nats_rollout_edge_batches=[1, "150%"]), "nats_rollout_edge_batches[1]: '150%': " + WAVE),
    (dict(nats_rollout_edge_batches=[1, "12.5%"]), "nats_rollout_edge_batches[1]: '12.5%': " + WAVE),
    (dict(nats_rollout_edge_batches=[-2]), "nats_rollout_edge_batches[0]: -2: " + WAVE),
    (dict(nats_rollout_edge_batches=[2.5]), "nats_rollout_edge_batches[0]: 2.5: " + WAVE),
    (dict(nats_rollout_edge_batches=[True]), "nats_rollout_edge_batches[0]: True: " + WAVE),
    (dict(nats_rollout_edge_batches=[[1]]), "nats_rollout_edge_batches[0]: [1]: " + WAVE),
    (dict(nats_rollout_edge_batches=[]), "nats_rollout_edge_batches: []: give at least one wave size"),
    (dict(nats_rollout_edge_batches=None), "nats_rollout_edge_batches: None: give the wave sizes as a list"),
    (dict(nats_rollout_edge_batches="1,25%"), "nats_rollout_edge_batches: '1,25%': " + WAVE),
    (dict(nats_rollout_edge_batches="[1, 2]"), "several sizes go in a list, such as [1, '25%']"),
    (dict(nats_rollout_max_fail_percentage=-1), "nats_rollout_max_fail_percentage: -1: a percentage of a wave's hosts"),
    (dict(nats_rollout_max_fail_percentage="abc"), "nats_rollout_max_fail_percentage: 'abc': a percentage"),
    (dict(nats_rollout_max_fail_percentage=101), "nats_rollout_max_fail_percentage: 101: a percentage"),
    (dict(nats_rollout_gate_timeout=0), "nats_rollout_gate_timeout: 0: the seconds a node has to pass each gate"),
    (dict(nats_rollout_gate_timeout="2m"), "nats_rollout_gate_timeout: '2m': the seconds"),
    (dict(nats_rollout_max_lag=-1), "nats_rollout_max_lag: -1: the operations a replica may lag and pass"),
    (dict(nats_rollout_max_lag="none"), "nats_rollout_max_lag: 'none': the operations"),
    (dict(nats_rollout_lame_duck="sometimes"), "nats_rollout_lame_duck: 'sometimes': true or false"),
    (dict(nats_rollout_only_outdated=None), "nats_rollout_only_outdated: None: true or false"),
    (dict(nats_rollout_downgrade_check="maybe"), "nats_rollout_downgrade_check: 'maybe': true or false"),
    (dict(_names=["nats_rollout_downgrade_chek"]),
     "nats_rollout_downgrade_chek is set, but the rollout has no such setting: did you mean "
     "nats_rollout_downgrade_check?"),
    (dict(nats_rollout_report_file="/no/such/dir/rollout.json"),
     "nats_rollout_report_file: '/no/such/dir/rollout.json': the directory /no/such/dir does not exist"),
    (dict(nats_rollout_report_file="/tmp"), "nats_rollout_report_file: '/tmp' is a directory"),
    (dict(nats_rollout_report_file=["/tmp/r.json"]), "nats_rollout_report_file: ['/tmp/r.json']: give a file path"),
    (dict(nats_fleet_hub_group="hubs"),
     "nats_fleet_hub_group: 'hubs' is not a group of the inventory (did you mean hub?); its groups: hub, nats_servers"),
    (dict(nats_fleet_hub_group=""), "nats_fleet_hub_group: '': give the name of the hub cluster's inventory group"),
    (dict(_names=["nats_rollout_canary"]),
     "nats_rollout_canary is set, but the rollout has no such setting: did you mean nats_rollout_canaries?"),
])
def test_a_knob_that_cannot_be_right_is_named_with_its_value(knobs, expected):
    found = problems(**knobs)
    assert len(found) == 1 and expected in found[0], found


def test_every_problem_is_reported_at_once_and_one_of_some_hosts_names_them():
    found = ro.knob_problems({"hub-1": {"nats_rollout_gate_timeout": 0, "nats_rollout_max_lag": -1},
                              "s1": {"nats_rollout_max_lag": -1}, "s2a": {"nats_rollout_max_lag": -1}}, GROUPS, DOMAINS)
    assert found == ["nats_rollout_gate_timeout: 0: the seconds a node has to pass each gate, a whole number from 1 "
                     "(default 120) (as set for hub-1)",
                     "nats_rollout_max_lag: -1: the operations a replica may lag and pass, a whole number from 0 "
                     "(default 0)"]


def test_a_long_list_of_sites_is_cut_short():
    hosts = ["e%03d" % i for i in range(50)]
    found = ro.knob_problems({"e000": {"nats_rollout_canaries": ["nowhere"]}}, {"nats_servers": hosts}, {})
    assert found[0].endswith("e019 and 30 more"), found


# --------------------------------------------------------------------------
# downgrades


def _read(body, status=200):
    return {"status": status, "json": body}


def _jsz(stream_level=None, consumer_level=None):
    def config(level):
        return {"metadata": {"_nats.req.level": str(level)}} if level is not None else {}
    return {"account_details": [{"name": "APP", "stream_detail": [
        {"name": "orders", "config": config(stream_level),
         "consumer_detail": [{"name": "billing", "config": config(consumer_level)}]}]}]}


VARZ_2_15 = _read({"version": "2.15.1"})


@pytest.mark.parametrize("target, varz, jsz", [
    ("", VARZ_2_15, {"skipped": True}),  # the package manager's version: nothing to compare
    ("2.15.1", VARZ_2_15, {"skipped": True}),  # the same release
    ("v2.16.0", VARZ_2_15, {"skipped": True}),  # newer
    ("2.14.0", VARZ_2_15, _read(_jsz(4, 1))),  # runs level 4
    ("2.9.0", VARZ_2_15, _read(_jsz(0, None))),  # nothing stamped
])
def test_moves_that_put_nothing_offline_pass(target, varz, jsz):
    assert ro.downgrade_problems("edge-1", target, varz, jsz) == []


def test_a_downgrade_names_every_asset_it_would_put_offline():
    problems = ro.downgrade_problems("edge-1", "2.10.22", VARZ_2_15, _read(_jsz(4, 1)))
    assert problems == [
        "edge-1: nats-server 2.10.22 runs JetStream API level 0 and would put offline: account APP stream orders needs "
        "JetStream API level 4 (nats-server 2.14.0 or newer); account APP stream orders consumer billing needs "
        "JetStream API level 1 (nats-server 2.11.0 or newer); roll it to nats-server 2.14.0 or newer, or remove what "
        "needs it"]


def test_a_level_newer_than_known_needs_the_release_that_runs_it():
    problems = ro.downgrade_problems("edge-1", "2.15.1", _read({"version": "2.16.2"}), _read(_jsz(6)))
    assert problems and "needs JetStream API level 6 (nats-server 2.16.2 or newer)" in problems[0], problems


@pytest.mark.parametrize("varz, jsz, expected", [
    ({"status": -1, "msg": "Connection refused"}, {"skipped": True}, "edge-1: its server did not answer /varz"),
    (_read("not json"), {"skipped": True}, "its server did not answer /varz"),
    (VARZ_2_15, {"status": 403, "msg": "Forbidden"}, "could not be read from /jsz (Forbidden)"),
    (VARZ_2_15, {"status": 200}, "could not be read from /jsz (status 200)"),
])
def test_what_cannot_be_read_is_refused_with_the_way_out(varz, jsz, expected):
    problems = ro.downgrade_problems("edge-1", "2.12.8", varz, jsz)
    assert len(problems) == 1 and expected in problems[0], problems
    assert "nats_rollout_downgrade_check: false" in problems[0], problems
