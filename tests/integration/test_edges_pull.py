"""nats-edge-pull against a project served here: an artifact over https verified with a CA made for the test (its
digest checked, an unchanged one not downloaded again, a wrong one refused with the site left as it was), a git
repository whose new commit is converged on the next run, sources that are not verified refused, and the host's
bundle decrypted with the host's own password. The playbook is a small one of the project: the runs are real
ansible-playbook runs with a local connection, as on an edge host."""

import functools
import hashlib
import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import tarfile
import threading

import pytest

from pki import CA

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUNNER = os.path.join(ROOT, "roles/nats_pull/files/nats-edge-pull")
BIN = os.path.dirname(sys.executable)
PASSWORD = "s3cret-of-edge-1"

PLAYBOOK = """\
- name: What the project says edge-1 runs, with its own bundle
  hosts: all
  gather_facts: false
  tasks:
    - name: Read the bundle
      ansible.builtin.include_vars:
        file: "{{ nats_pull_bundle_file }}"
        name: bundle
    - name: Write what was converged
      ansible.builtin.copy:
        content: "{{ {'version': wanted_version, 'secret': bundle.nats_pull_bundle.files['creds/TEST/leaf.creds'].content,
                      'revision': nats_pull_revision, 'host': inventory_hostname} | to_json }}"
        dest: "{{ out_file }}"
        mode: "0600"
"""


def project(tmp_path, version, out_file):
    """A project: inventory (edge-1 and edge-2), the playbook, edge-1's bundle encrypted with its password."""
    root = tmp_path / "project"
    shutil.rmtree(root, ignore_errors=True)
    (root / "inventory" / "group_vars").mkdir(parents=True)
    (root / "pull").mkdir()
    (root / "inventory" / "hosts.yml").write_text(
        "all:\n  hosts:\n    edge-1: {ansible_host: 192.0.2.1}\n    edge-2: {}\n")
    (root / "inventory" / "group_vars" / "all.yml").write_text(
        "wanted_version: %s\nout_file: %s\n" % (version, out_file))
    (root / "converge.yml").write_text(PLAYBOOK)
    bundle = {"nats_pull_bundle": {"host": "edge-1", "vars": {}, "files": {
        "creds/TEST/leaf.creds": {"content": "leaf creds of edge-1", "mode": "0600"}}}}
    plain = root / "pull" / "edge-1.vault"
    plain.write_text(json.dumps(bundle))
    password = tmp_path / "controller.pass"
    password.write_text(PASSWORD + "\n")
    subprocess.run([os.path.join(BIN, "ansible-vault"), "encrypt", "--vault-password-file", str(password), str(plain)],
                   check=True, capture_output=True)
    assert "leaf creds" not in plain.read_text()
    return root


def artifact(project_dir, served, name="fleet.tar.gz"):
    path = os.path.join(served, name)
    with tarfile.open(path, "w:gz") as tar:
        for entry in sorted(os.listdir(project_dir)):
            tar.add(os.path.join(project_dir, entry), arcname=entry)
    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    with open(path + ".sha256", "w") as handle:
        handle.write("%s  %s\n" % (digest, name))
    return digest


@pytest.fixture
def https(tmp_path):
    """An https server on loopback serving tmp_path/served, its certificate from a CA made here; counts requests."""
    served = tmp_path / "served"
    served.mkdir()
    ca = CA(tmp_path, "pull-ca")
    cert, key = ca.issue("files", sans=("127.0.0.1",))
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            requests.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(served)))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {"url": "https://127.0.0.1:%d" % server.server_address[1], "dir": str(served), "ca": ca.path,
           "requests": requests}
    server.shutdown()


def configure(tmp_path, source, **extra):
    state = tmp_path / "state"
    password = tmp_path / "edge.pass"
    password.write_text(PASSWORD + "\n")
    password.chmod(0o600)
    config = dict({"host": "edge-1", "source": source, "playbook": "converge.yml", "inventory": "inventory",
                   "bundle": "pull/edge-1.vault", "vault_password_file": str(password),
                   "ansible_playbook": os.path.join(BIN, "ansible-playbook"), "python": sys.executable,
                   "state_dir": str(state), "timeout": 300}, **extra)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path), state


def pull(config, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    proc = subprocess.run([sys.executable, RUNNER, "--config", config] + list(args), capture_output=True, text=True,
                          timeout=300, env=env, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def status(state):
    return json.loads((state / "status.json").read_text())


def test_an_artifact_over_verified_https_converges_the_host_and_a_changed_one_again(tmp_path, https):
    out = tmp_path / "converged.json"
    digest = artifact(project(tmp_path, "2.14.2", out), https["dir"])
    config, state = configure(tmp_path, {"type": "artifact", "url": https["url"] + "/fleet.tar.gz"},
                              ca_file=https["ca"])
    code, output = pull(config)
    assert code == 0, output
    assert json.loads(out.read_text()) == {"version": "2.14.2", "secret": "leaf creds of edge-1",
                                           "revision": digest, "host": "edge-1"}
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    done = status(state)
    assert done["result"] == "converged" and done["converged_revision"] == digest, done
    assert done["recap"]["failed"] == 0 and done["recap"]["changed"] == 1, done
    assert "leaf creds" not in output  # the bundle's secret is not in the journal

    # nothing new: the digest is read, the artifact is not downloaded again, the run changes nothing
    del https["requests"][:]
    code, output = pull(config)
    assert code == 0 and https["requests"] == ["/fleet.tar.gz.sha256"], (output, https["requests"])
    assert status(state)["recap"]["changed"] == 0

    # the project's data changes (the next wave's version): the next run converges it
    digest = artifact(project(tmp_path, "2.15.1", out), https["dir"])
    code, output = pull(config)
    assert code == 0, output
    assert json.loads(out.read_text())["version"] == "2.15.1" and status(state)["converged_revision"] == digest


def test_an_artifact_that_is_not_what_its_digest_says_changes_nothing(tmp_path, https):
    out = tmp_path / "converged.json"
    digest = artifact(project(tmp_path, "2.14.2", out), https["dir"])
    config, state = configure(tmp_path, {"type": "artifact", "url": https["url"] + "/fleet.tar.gz"},
                              ca_file=https["ca"])
    assert pull(config)[0] == 0
    before = out.read_text()
    artifact(project(tmp_path, "6.6.6", out), https["dir"])
    with open(os.path.join(https["dir"], "fleet.tar.gz.sha256"), "w") as handle:
        handle.write("0" * 64 + "  fleet.tar.gz\n")
    code, output = pull(config)
    assert code == 1 and "SHA-256" in output and "says " + "0" * 64 + ": nothing changed" in output, output
    assert out.read_text() == before
    failed = status(state)
    assert failed["result"] == "fetch failed" and failed["converged_revision"] == digest, failed


def test_sources_that_are_not_verified_are_refused(tmp_path, https):
    out = tmp_path / "converged.json"
    artifact(project(tmp_path, "2.14.2", out), https["dir"])
    # the server's certificate is not one the system's CAs vouch for
    config, state = configure(tmp_path, {"type": "artifact", "url": https["url"] + "/fleet.tar.gz"})
    code, output = pull(config)
    assert code == 1 and "CERTIFICATE_VERIFY_FAILED" in output and not out.exists(), output
    assert status(state)["result"] == "fetch failed"
    # plain http, unless allowed in so many words
    config, _state = configure(tmp_path, {"type": "artifact", "url": "http://127.0.0.1:9/fleet.tar.gz"})
    code, output = pull(config)
    assert code == 1 and "is not verified (http://): use https" in output, output


def test_a_git_project_converges_its_latest_commit(tmp_path):
    out = tmp_path / "converged.json"
    repo = tmp_path / "repo"
    project_dir = project(tmp_path, "2.14.2", out)
    shutil.copytree(project_dir, repo)
    git = ["git", "-C", str(repo), "-c", "user.name=ops", "-c", "user.email=ops@fleet.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "wave 1"], check=True)
    config, state = configure(tmp_path, {"type": "git", "url": "file://%s" % repo, "ref": "main"})
    code, output = pull(config)
    assert code == 0, output
    first = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert json.loads(out.read_text())["revision"] == first and status(state)["converged_revision"] == first

    (repo / "inventory" / "group_vars" / "all.yml").write_text("wanted_version: 2.15.1\nout_file: %s\n" % out)
    subprocess.run(git + ["commit", "-qam", "wave 2"], check=True)
    code, output = pull(config)
    assert code == 0, output
    assert json.loads(out.read_text())["version"] == "2.15.1" and status(state)["converged_revision"] != first


def test_a_bundle_that_the_host_cannot_decrypt_fails_the_run_and_says_so(tmp_path, https):
    out = tmp_path / "converged.json"
    artifact(project(tmp_path, "2.14.2", out), https["dir"])
    config, state = configure(tmp_path, {"type": "artifact", "url": https["url"] + "/fleet.tar.gz"},
                              ca_file=https["ca"])
    (tmp_path / "edge.pass").write_text("another password\n")
    code, output = pull(config)
    assert code != 0 and "Decryption failed" in output and not out.exists(), output
    failed = status(state)
    assert failed["result"] == "failed" and failed["converged_revision"] is None, failed


def test_runs_never_overlap_and_a_check_waits_for_the_run_in_progress(tmp_path, https):
    import fcntl

    artifact(project(tmp_path, "2.14.2", tmp_path / "converged.json"), https["dir"])
    config, state = configure(tmp_path, {"type": "artifact", "url": https["url"] + "/fleet.tar.gz"},
                              ca_file=https["ca"])
    state.mkdir()
    with open(state / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a run in progress
        code, output = pull(config)
        assert code == 1 and "another run holds" in output, output
        releaser = threading.Timer(2, lambda: fcntl.flock(held, fcntl.LOCK_UN))
        releaser.start()
        code, output = pull(config, "--fetch-only", "--wait", "60")
        releaser.join()
    assert code == 0 and status(state)["result"] == "fetched", output
