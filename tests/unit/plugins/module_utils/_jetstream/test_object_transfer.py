"""A fetch's input checked before anything is read: the mode (permission bits only), dest as a path, the store's
name, and the digests a fetch can check."""

import pytest

from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import buckets as kv
from ansible_collections.nats_edge.fleet.plugins.module_utils._jetstream import object_transfer as objects


@pytest.mark.parametrize("value, mode", [
    ("0644", 0o644), ("644", 0o644), ("0640", 0o640), ("0600", 0o600), ("0000", 0), ("0777", 0o777),
    (420, 0o644),  # YAML's number for an unquoted 0644
    (0o640, 0o640), (0, 0),
    ("0o640", 0o640),  # YAML 1.2's octal, a string to YAML 1.1
    (" 0644 ", 0o644),
    (None, 0o644),  # not set: the default
])
def test_a_mode_is_3_or_4_octal_digits_or_yamls_number_for_an_unquoted_one(value, mode):
    assert objects.file_mode(value) == mode


@pytest.mark.parametrize("value, message", [
    ("-1", "mode: '-1' is not an octal mode; write the mode quoted, as 3 or 4 octal digits: mode: '0644'"),
    (-1, "mode: -1 is a negative number, not a mode; write the mode quoted, as 3 or 4 octal digits: mode: '0644'"),
    (True, "mode: True is a boolean, not a mode; write the mode quoted, as 3 or 4 octal digits: mode: '0644'"),
    (False, "mode: False is a boolean, not a mode"),
    (644, "mode: 644 is read by YAML as the decimal number 644, which is the mode 1204; quote it: mode: '0644'"),
    (755, "mode: 755 is read by YAML as the decimal number 755, which is the mode 1363; quote it: mode: '0755'"),
    (2750, "mode: 2750 (the mode 5276) sets the setuid and sticky bits, which a fetched file does not take "
           "(permission bits only, 0000 to 0777); write mode: '0276'; YAML reads digits without quotes and without a "
           "leading 0 as a decimal number: quote a mode"),
    ("100644", "mode: '100644' has more than 4 digits; a mode has 3 or 4 octal digits, such as mode: '0644'"),
    ("00644", "mode: '00644' has more than 4 digits"),
    (100644, "mode: 100644 is the number 304444 in octal, more than 4 digits, not a mode"),
    ("4755", "mode: '4755' sets the setuid bit, which a fetched file does not take (permission bits only, 0000 to "
             "0777); write mode: '0755'"),
    ("2750", "mode: '2750' sets the setgid bit, which a fetched file does not take"),
    ("1777", "mode: '1777' sets the sticky bit"),
    ("6755", "mode: '6755' sets the setuid and setgid bits"),
    (0o7777, "mode: 4095 (the mode 7777) sets the setuid, setgid and sticky bits"),
    (0o4755, "mode: 2541 (the mode 4755) sets the setuid bit"),
    ("0648", "mode: '0648' is not an octal mode"),
    ("u=rw,g=r", "mode: 'u=rw,g=r' is not an octal mode"),
    ("", "mode: '' is not an octal mode"),
    ("64", "mode: '64' is not an octal mode"),
    (6.44, "mode: 6.44 is not an octal mode"),
    (["0644"], "mode: ['0644'] is not an octal mode"),
])
def test_anything_else_is_refused_naming_the_field_and_the_value(value, message):
    with pytest.raises(objects.ObjectError) as refused:
        objects.file_mode(value)
    assert message in str(refused.value)


def test_the_field_is_named_as_the_caller_names_it():
    with pytest.raises(objects.ObjectError, match=r"^nats_object_fetch\[0\]\.mode: '-1'"):
        objects.file_mode("-1", field="nats_object_fetch[0].mode")


@pytest.mark.parametrize("dest, message", [
    ("", "dest: '' names no file; give the path of the file to write"),
    ("   ", "dest: '   ' names no file"),
    (None, "dest: None names no file"),
    ("/opt/app/", "dest: /opt/app/ is the path of a directory; give the path of the file to write in it"),
    ("/opt/app/.", "dest: /opt/app/. is the path of a directory"),
    ("/opt/..", "dest: /opt/.. is the path of a directory"),
])
def test_a_dest_that_names_no_file_is_refused(dest, message):
    with pytest.raises(objects.ObjectError) as refused:
        objects.check_dest_path(dest)
    assert message in str(refused.value)


def test_a_fetch_item_is_checked_without_its_file_when_the_file_is_written_on_another_host():
    # the fleet's preflight, on the controller: the hosts' directories are not there
    item = dict(bucket="fw", name="gw.bin", dest="/nonexistent/dir/gw.bin", mode=0o640, creds=None)
    assert objects.checked_fetch_item(item) == dict(item, mode=0o640)
    assert objects.checked_fetch_item(dict(item, mode=None))["mode"] == 0o644
    with pytest.raises(objects.ObjectError, match="dest: the directory of /nonexistent/dir/gw.bin does not exist"):
        objects.checked_fetch_item(item, on_this_host=True)
    with pytest.raises(objects.ObjectError, match="mode: 644 is read by YAML"):
        objects.checked_fetch_item(dict(item, mode=644))
    with pytest.raises(kv.BucketError, match="object store bucket name: 'f.w' is not valid"):
        objects.checked_fetch_item(dict(item, bucket="f.w"))
    with pytest.raises(objects.ObjectError, match="dest: '' names no file"):
        objects.checked_fetch_item(dict(item, dest=""))


@pytest.mark.parametrize("digest", [kv.digest_of(b"\0" * 32), "sha-256=" + kv.digest_of(b"\0" * 32)[8:]])
def test_a_sha256_digest_is_one_a_fetch_checks(digest):
    objects.check_digest({"digest": digest}, "object 'a' of bucket 'fw'")


@pytest.mark.parametrize("digest, carries", [
    ("MD5=1B2M2Y8AsgTpgAmY7PhCfg==", "carries the MD5 digest 'MD5=1B2M2Y8AsgTpgAmY7PhCfg==', which another client "
                                     "wrote, not the SHA-256 digest the nats clients write"),
    ("SHA-512=abc", "carries the SHA-512 digest 'SHA-512=abc'"),
    ("d41d8cd98f00b204e9800998ecf8427e", "carries the digest 'd41d8cd98f00b204e9800998ecf8427e', in no form"),
    ("", "carries no digest"),
    (None, "carries no digest"),
])
def test_another_digest_cannot_be_verified_and_is_refused(digest, carries):
    with pytest.raises(objects.FetchRefused) as refused:
        objects.check_digest({"digest": digest}, "object 'a' of bucket 'fw'")
    assert str(refused.value).startswith("object 'a' of bucket 'fw' " + carries), str(refused.value)
    assert "its content cannot be verified, so it is not fetched and dest is left as it was" in str(refused.value)


def test_a_refused_fetch_is_not_an_object_error_a_later_run_might_clear():
    # jetstream_domain's defer_copies leaves an ObjectError (a copy still filling) to a later run, never this
    assert not issubclass(objects.FetchRefused, objects.ObjectError)


def test_chunks_are_cut_at_the_chunk_size_asked(tmp_path):
    path = tmp_path / "data"
    path.write_bytes(b"x" * 2500)
    for source in (str(path), b"x" * 2500):
        totals = {"size": 0, "chunks": 0}
        blocks = [data for _subject, data, _headers in objects._chunks(source, "s", totals, 1000)]
        assert [len(b) for b in blocks] == [1000, 1000, 500] and totals == {"size": 2500, "chunks": 3}
    totals = {"size": 0, "chunks": 0}
    assert len(list(objects._chunks(b"x" * (kv.CHUNK_SIZE + 1), "s", totals))) == 2


def test_the_max_payload_is_the_connected_servers_or_none():
    class Connection(object):
        max_payload = 1048576

    class Client(object):
        _nc = Connection()

    assert objects.max_payload(Client()) == 1048576 and objects.max_payload(object()) is None
