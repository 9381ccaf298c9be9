"""Rows of the bad-input table (test_bad_input.py) for jetstream_object_fetch."""


def rows(table):
    """(id, module, arguments, message fragment) rows; ``table`` is test_bad_input, for its constants."""
    # "{files}/kept.bin" is a file at 0640 that every refused row must leave as it is (content and mode)
    kept = dict(table.JS, bucket="fw", name="a", dest="{files}/kept.bin")
    fetch = "jetstream_object_fetch"  # by name: the table's module-level names are read while it is imported
    return [
        # -- mode: permission bits only, 3 or 4 octal digits, or YAML's number for an unquoted 0644 ---------------
        ("fetch-mode-string-minus-one", fetch, dict(kept, mode="-1"),
         "object 'a' of bucket 'fw': mode: '-1' is not an octal mode; write the mode quoted"),
        ("fetch-mode-negative-number", fetch, dict(kept, mode=-1), "mode: -1 is a negative number, not a mode"),
        ("fetch-mode-boolean", fetch, dict(kept, mode=True), "mode: True is a boolean, not a mode"),
        ("fetch-mode-unquoted-644", fetch, dict(kept, mode=644),
         "mode: 644 is read by YAML as the decimal number 644, which is the mode 1204; quote it: mode: '0644'"),
        ("fetch-mode-unquoted-2750", fetch, dict(kept, mode=2750),
         "mode: 2750 (the mode 5276) sets the setuid and sticky bits"),
        ("fetch-mode-six-digits", fetch, dict(kept, mode="100644"),
         "mode: '100644' has more than 4 digits; a mode has 3 or 4 octal digits, such as mode: '0644'"),
        ("fetch-mode-number-beyond-7777", fetch, dict(kept, mode=100644), "mode: 100644 is the number 304444 in octal"),
        ("fetch-mode-setuid", fetch, dict(kept, mode="4755"), "mode: '4755' sets the setuid bit"),
        ("fetch-mode-setgid", fetch, dict(kept, mode="2750"), "mode: '2750' sets the setgid bit"),
        ("fetch-mode-sticky", fetch, dict(kept, mode="1644"), "mode: '1644' sets the sticky bit"),
        ("fetch-mode-every-bit-as-number", fetch, dict(kept, mode=4095),
         "mode: 4095 (the mode 7777) sets the setuid, setgid and sticky bits"),
        ("fetch-mode-not-octal-digit", fetch, dict(kept, mode="0648"), "mode: '0648' is not an octal mode"),
        ("fetch-mode-symbolic", fetch, dict(kept, mode="u=rw,g=r"), "mode: 'u=rw,g=r' is not an octal mode"),
        ("fetch-mode-empty", fetch, dict(kept, mode=""), "mode: '' is not an octal mode"),
        ("fetch-mode-float", fetch, dict(kept, mode=6.44), "mode: 6.44 is not an octal mode"),
        ("fetch-mode-list", fetch, dict(kept, mode=["0644"]), "mode: ['0644'] is not an octal mode"),
        # -- dest: a regular file (or none yet) in a directory that exists --------------------------------------
        ("fetch-dest-empty", fetch, dict(kept, dest=""), "object 'a' of bucket 'fw': dest: '' names no file"),
        ("fetch-dest-directory", fetch, dict(kept, dest="{files}"),
         "dest: {files} is a directory; give the path of the file to write in it"),
        ("fetch-dest-trailing-slash", fetch, dict(kept, dest="{files}/new/"),
         "dest: {files}/new/ is the path of a directory"),
        # a symbolic link every Linux host has (the fetch tests check that a link's target is left alone)
        ("fetch-dest-symlink", fetch, dict(kept, dest="/proc/self"), "dest: /proc/self is a symbolic link"),
        ("fetch-dest-parent-is-a-file", fetch, dict(kept, dest="{files}/kept.bin/a"),
         "dest: the directory of {files}/kept.bin/a, {files}/kept.bin, is not a directory"),
        ("fetch-dest-parent-missing", fetch, dict(kept, dest="{files}/nowhere/a"),
         "dest: the directory of {files}/nowhere/a does not exist"),
        # -- where the object is read from -----------------------------------------------------------------------
        ("fetch-bucket-name", fetch, dict(kept, bucket="fw/1"), "object store bucket name: 'fw/1' is not valid"),
        ("fetch-unknown-domain", fetch, dict(kept, domain="nowhere"),
         "object 'a' of bucket 'fw': no JetStream server of domain 'nowhere' answers"),
        ("fetch-api-prefix-nobody", fetch, dict(kept, api_prefix="$JS.nobody.API"),
         "nothing answers on the JetStream API $JS.nobody.API: check api_prefix"),
        ("fetch-from-kv-bucket", fetch, dict(kept, bucket="held"),
         "object 'a' of bucket 'held': 'held' is a key-value bucket in the local domain, not an object store"),
        ("fetch-no-such-store", fetch, dict(kept, bucket="nostore"),
         "no object store 'nostore' exists in the local domain (object stores there: fw)"),
    ]
