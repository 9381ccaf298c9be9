"""The OpenRC edge runs nats-server under supervise-daemon with the systemd unit's hardening intent."""

from lab_hosts import monitor


def server_pid(host):
    return int(host.check_output("cat /run/openrc/options/nats-server/child_pid"))


def proc_status(host, pid):
    lines = host.check_output("cat /proc/%d/status" % pid).splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line)


def test_the_edge_boots_openrc_and_the_hub_systemd(lab):
    assert lab["edge1"].check_output("cat /proc/1/comm") == "openrc-init"
    assert lab["hub1"].check_output("cat /proc/1/comm") == "systemd"
    assert not lab["edge1"].file("/etc/systemd/system/nats-server.service").exists


def test_supervised_enabled_and_started(lab):
    edge = lab["edge1"]
    script = edge.file("/etc/init.d/nats-server")
    assert script.user == "root" and script.mode == 0o755
    assert script.content_string.startswith("#!/sbin/openrc-run\n")
    assert "supervisor=supervise-daemon" in script.content_string
    assert edge.run("rc-service nats-server status").rc == 0
    assert "nats-server" in edge.check_output("rc-update show default")
    pid = server_pid(edge)
    parent = int(proc_status(edge, pid)["PPid"])
    assert edge.check_output("tr '\\0' ' ' < /proc/%d/cmdline" % parent).split()[:2] == [
        "supervise-daemon", "nats-server"]


def test_own_user_no_privileges(lab):
    edge = lab["edge1"]
    status = proc_status(edge, server_pid(edge))
    uid = edge.check_output("id -u nats")
    assert status["Uid"].split()[:2] == [uid, uid]
    assert status["NoNewPrivs"].strip() == "1"
    for kind in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[kind], 16) == 0, kind
    assert status["Umask"].strip() == "0027"
    limits = edge.check_output("cat /proc/%d/limits" % server_pid(edge))
    assert [line.split()[3:5] for line in limits.splitlines() if line.startswith("Max open files")] == [
        ["16384", "16384"]]


def test_service_environment(lab):
    edge = lab["edge1"]
    # the server's own user may read its environment (root here lacks CAP_SYS_PTRACE)
    env = edge.check_output("setpriv --reuid nats --regid nats --clear-groups cat /proc/%d/environ | tr '\\0' '\\n'"
                            % server_pid(edge)).splitlines()
    assert "GOMEMLIMIT=192MiB" in env


def test_log_file(lab):
    log = lab["edge1"].file("/var/log/nats-server.log")
    assert (log.user, log.group, log.mode) == ("nats", "nats", 0o640)
    assert "Server is ready" in log.content_string


def test_leaf_of_the_hub_in_its_own_domain(lab):
    edge = lab["edge1"]
    assert monitor(edge, "jsz")["config"]["domain"] == "edge1"
    assert len(monitor(edge, "leafz")["leafs"]) == 1
    assert monitor(lab["hub1"], "leafz")["leafs"][0]["name"] == "edge1"
