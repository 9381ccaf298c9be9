"""jetstream_object_fetch given what cannot be right, on a hub and a leaf with their own JetStream domains: a mode
beyond permission bits, a dest that is a directory or a symbolic link, a key-value bucket, no store, a domain
nobody answers for, an object carrying a digest no fetch can check - each refused with a message naming the field
and the value, before any chunk is read, the file and its neighbours left as they were; and the diff of a fetch
that only sets the mode."""

import base64
import hashlib
import json
import os

from conftest import jetstream, run_module

OBJECT = os.urandom(2 * 1024 * 1024 + 5)  # large enough that a download shows in the hub's out_bytes
SHA1 = hashlib.sha1(OBJECT).hexdigest()


def hub_store(hub_and_leaf, tmp_path):
    """The hub's connection options, with an object store 'fw' holding 'gw.bin' (OBJECT) and a key-value bucket
    'cfg'."""
    hub = dict(servers=[hub_and_leaf["hub"]], domain="hub", timeout=5.0)
    src = tmp_path / "gw.bin"
    src.write_bytes(OBJECT)
    assert run_module("jetstream_object_store", dict(hub, name="fw", objects=[
        {"name": "gw.bin", "src": str(src)}]))["changed"]
    assert run_module("jetstream_kv", dict(hub, name="cfg", entries={"k": "v"}))["changed"]
    return hub


def out_bytes(hub_and_leaf):
    return hub_and_leaf["hub_server"].get("varz")["out_bytes"]


def refused(args, fragment, check_mode=False):
    result = run_module("jetstream_object_fetch", args, check_mode=check_mode)
    assert result.get("failed") and fragment in result["msg"] and not result.get("changed"), (fragment, result)
    return result


def state(path):
    """What must not change of a file: its content and its mode (not following a link)."""
    info = os.lstat(str(path))
    return (os.readlink(str(path)) if os.path.islink(str(path)) else path.read_bytes(), info.st_mode)


def test_mode_is_permission_bits_only_quoted_digits_or_yamls_number_else_refused_before_anything_is_read(
        hub_and_leaf, tmp_path):
    hub = hub_store(hub_and_leaf, tmp_path)
    files = tmp_path / "files"
    files.mkdir()
    fetch = dict(hub, bucket="fw", name="gw.bin", dest=str(files / "out.bin"))
    made = run_module("jetstream_object_fetch", dict(fetch, mode="0640"))
    assert made["changed"] and made["checksum"] == SHA1 and os.stat(fetch["dest"]).st_mode & 0o7777 == 0o640, made
    # the same mode written otherwise: "640", YAML's number for an unquoted 0640, YAML 1.2's 0o640
    for same in ("640", 0o640, "0o640"):
        again = run_module("jetstream_object_fetch", dict(fetch, mode=same))
        assert not again.get("failed") and not again["changed"], (same, again)

    kept = files / "kept.bin"
    kept.write_bytes(b"as it was\n")
    os.chmod(str(kept), 0o640)
    before, sent = state(kept), out_bytes(hub_and_leaf)
    keep = dict(fetch, dest=str(kept))
    for mode, fragment in (
            ("-1", "mode: '-1' is not an octal mode; write the mode quoted, as 3 or 4 octal digits: mode: '0644'"),
            (-1, "mode: -1 is a negative number, not a mode"),
            (True, "mode: True is a boolean, not a mode"),
            (644, "mode: 644 is read by YAML as the decimal number 644, which is the mode 1204; quote it: mode: '0644'"),
            ("100644", "mode: '100644' has more than 4 digits; a mode has 3 or 4 octal digits, such as mode: '0644'"),
            ("2750", "mode: '2750' sets the setgid bit, which a fetched file does not take"),
            ("4755", "mode: '4755' sets the setuid bit"),
            (0o7777, "mode: 4095 (the mode 7777) sets the setuid, setgid and sticky bits")):
        refused(dict(keep, mode=mode), "object 'gw.bin' of bucket 'fw': " + fragment)
    assert state(kept) == before
    assert sorted(os.listdir(str(files))) == ["kept.bin", "out.bin"]  # no temporary file
    assert out_bytes(hub_and_leaf) - sent < 256 * 1024  # no chunk was read
    # jetstream_domain's fetches (the fleet's cache) take the same check
    domain = run_module("jetstream_domain", dict(hub, fetches=[dict(bucket="fw", name="gw.bin", dest=str(kept),
                                                                    mode="-1")]))
    assert domain.get("failed") and "fetches[0] (fw/gw.bin): mode: '-1' is not an octal mode" in domain["msg"], domain
    assert state(kept) == before


def test_dest_a_directory_a_symbolic_link_or_an_empty_dest_is_refused_before_anything_is_read(hub_and_leaf, tmp_path):
    hub = hub_store(hub_and_leaf, tmp_path)
    fetch = dict(hub, bucket="fw", name="gw.bin", mode="0644")
    # a link to a file with the object's content at 0600: the link is not followed, its target keeps its mode
    target = tmp_path / "target.bin"
    target.write_bytes(OBJECT)
    os.chmod(str(target), 0o600)
    (tmp_path / "out").mkdir()
    link = tmp_path / "out" / "link.bin"
    link.symlink_to(target)
    files, sent = dict((p, state(p)) for p in (target, link)), out_bytes(hub_and_leaf)
    for check_mode in (True, False):
        refused(dict(fetch, dest=str(link)), "object 'gw.bin' of bucket 'fw': dest: %s is a symbolic link (to %s)" % (
            link, target), check_mode=check_mode)
    refused(dict(fetch, dest=str(tmp_path / "out")), "dest: %s is a directory; give the path of the file to write "
                                                     "in it, such as %s/<name>" % (tmp_path / "out", tmp_path / "out"))
    refused(dict(fetch, dest=""), "object 'gw.bin' of bucket 'fw': dest: '' names no file")
    # another kind of file (a pipe here; a device is refused the same way)
    pipe = tmp_path / "out" / "pipe"
    os.mkfifo(str(pipe))
    refused(dict(fetch, dest=str(pipe)), "dest: %s is a named pipe; give the path of a regular file" % pipe)
    os.unlink(str(pipe))
    refused(dict(fetch, dest=str(tmp_path / "missing" / "gw.bin")),
            "dest: the directory of %s does not exist" % (tmp_path / "missing" / "gw.bin"))
    assert dict((p, state(p)) for p in (target, link)) == files
    assert os.listdir(str(tmp_path / "out")) == ["link.bin"]  # no temporary file
    assert out_bytes(hub_and_leaf) - sent < 256 * 1024  # no chunk was read
    # jetstream_domain's fetches take the same check
    domain = run_module("jetstream_domain", dict(hub, fetches=[dict(bucket="fw", name="gw.bin", dest=str(link))]))
    assert domain.get("failed") and "fetches[0] (fw/gw.bin): dest: %s is a symbolic link" % link in domain["msg"], domain
    assert dict((p, state(p)) for p in (target, link)) == files


def test_a_file_with_the_objects_content_and_another_mode_only_has_its_mode_set(hub_and_leaf, tmp_path):
    hub = hub_store(hub_and_leaf, tmp_path)
    dest = tmp_path / "gw.out"
    fetch = dict(hub, bucket="fw", name="gw.bin", dest=str(dest))
    assert run_module("jetstream_object_fetch", fetch)["changed"]
    inode, sent = os.stat(str(dest)).st_ino, out_bytes(hub_and_leaf)
    predicted = run_module("jetstream_object_fetch", dict(fetch, mode="0600"), check_mode=True)
    assert predicted["changed"] and os.stat(str(dest)).st_mode & 0o7777 == 0o644, predicted
    made = run_module("jetstream_object_fetch", dict(fetch, mode="0600"))
    assert made["changed"] and made["checksum"] == SHA1 and os.stat(str(dest)).st_mode & 0o7777 == 0o600, made
    assert os.stat(str(dest)).st_ino == inode and out_bytes(hub_and_leaf) - sent < 256 * 1024  # not written again
    assert not run_module("jetstream_object_fetch", dict(fetch, mode="0600"))["changed"]


def test_diff_returns_the_files_digest_and_mode_before_and_after(hub_and_leaf, tmp_path):
    hub = hub_store(hub_and_leaf, tmp_path)
    dest = tmp_path / "gw.out"
    fetch = dict(hub, bucket="fw", name="gw.bin", dest=str(dest))
    new = run_module("jetstream_object_fetch", fetch, diff=True)
    digest = new["digest"]
    assert new["diff"] == {"before": {"digest": None, "mode": None}, "after": {"digest": digest, "mode": "0644"}}, new
    # only the mode changes: the diff says so, in check mode as in the run
    mode_only = {"before": {"digest": digest, "mode": "0644"}, "after": {"digest": digest, "mode": "0600"}}
    for check_mode in (True, False):
        result = run_module("jetstream_object_fetch", dict(fetch, mode="0600"), check_mode=check_mode, diff=True)
        assert result["changed"] and result["diff"] == mode_only, result
    dest.write_bytes(b"edited")
    content = run_module("jetstream_object_fetch", dict(fetch, mode="0600"), diff=True)
    edited = "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(b"edited").digest()).decode()
    assert content["diff"]["before"] == {"digest": edited, "mode": "0600"}, content
    assert content["diff"]["after"] == {"digest": digest, "mode": "0600"}, content


def test_an_object_carrying_another_digest_is_refused_and_nothing_is_written(hub_and_leaf, tmp_path):
    hub = hub_store(hub_and_leaf, tmp_path)
    from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
    # metadata as another client writes it: an MD5 digest of the same chunks
    md5 = "MD5=" + base64.b64encode(hashlib.md5(OBJECT).digest()).decode()
    with jetstream(hub_and_leaf["hub"], "hub") as js:
        meta = json.loads(js.client.request("$JS.hub.API.DIRECT.GET.OBJ_fw", json.dumps(
            {"last_by_subj": kv.meta_subject("fw", "gw.bin")}).encode()).decode())
        meta["digest"] = md5
        assert "seq" in json.loads(js.client.request(kv.meta_subject("fw", "gw.bin"), json.dumps(meta).encode()))
    (tmp_path / "files").mkdir()
    dest = tmp_path / "files" / "gw.out"
    dest.write_bytes(b"old")
    fetch = dict(hub, bucket="fw", name="gw.bin", dest=str(dest))
    sent = out_bytes(hub_and_leaf)
    for check_mode in (True, False):
        refused(fetch, "object 'gw.bin' of bucket 'fw' in domain 'hub' carries the MD5 digest %r, which another "
                       "client wrote, not the SHA-256 digest the nats clients write: its content cannot be verified"
                % md5, check_mode=check_mode)
    assert dest.read_bytes() == b"old" and os.listdir(str(tmp_path / "files")) == ["gw.out"]
    assert out_bytes(hub_and_leaf) - sent < 256 * 1024  # no chunk was read
    # not something a later run would fetch: jetstream_domain fails with it, even with defer_copies
    domain = run_module("jetstream_domain", dict(hub, defer_copies=True, fetches=[
        dict(bucket="fw", name="gw.bin", dest=str(dest))]))
    assert domain.get("failed") and "carries the MD5 digest" in domain["msg"], domain
    assert dest.read_bytes() == b"old"


def test_a_key_value_bucket_no_store_or_a_domain_no_server_answers_for_fail_saying_so(hub_and_leaf, tmp_path):
    hub = hub_store(hub_and_leaf, tmp_path)
    dest = tmp_path / "out.bin"
    fetch = dict(hub, name="gw.bin", dest=str(dest))
    refused(dict(fetch, bucket="cfg"), "object 'gw.bin' of bucket 'cfg': 'cfg' is a key-value bucket in domain "
                                       "'hub', not an object store")
    refused(dict(fetch, bucket="nope"), "object 'gw.bin' of bucket 'nope': no object store 'nope' exists in domain "
                                        "'hub' (object stores there: fw)")
    refused(dict(fetch, bucket="fw", domain="nowhere"), "object 'gw.bin' of bucket 'fw': no JetStream server of "
                                                        "domain 'nowhere' answers (the server this task is connected "
                                                        "to is in domain 'hub'): check domain")
    # not something a later run would fetch: jetstream_domain fails with it, even with defer_copies
    domain = run_module("jetstream_domain", dict(hub, defer_copies=True, fetches=[
        dict(bucket="cfg", name="gw.bin", dest=str(dest))]))
    assert domain.get("failed") and "'cfg' is a key-value bucket in domain 'hub'" in domain["msg"], domain
    # the hub's domain read through the leaf with the hub down
    hub_and_leaf["hub_server"].stop()
    leaf = dict(servers=[hub_and_leaf["leaf"]], domain="hub", timeout=3.0)
    refused(dict(leaf, bucket="fw", name="gw.bin", dest=str(dest)),
            "no JetStream server of domain 'hub' answers (the server this task is connected to is in domain 'leaf')")
    assert not dest.exists()
