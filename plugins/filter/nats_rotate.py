# -*- coding: utf-8 -*-
# Copyright: contributors to nats_edge.fleet
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of ``nats_edge.fleet.rotate_creds``: which users get new keys and which
accounts new signing keys, checked against the declared accounts and leaf remotes."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError


def _leaf_users(hostvars, hosts, system_account, system_user):
    """{"ACCOUNT/user": [host, ...]} of the users the hosts' leaf remotes connect as."""
    found = {}
    for host in hosts or []:
        for i, remote in enumerate((hostvars[host] or {}).get("nats_server_leafnode_remotes") or []):
            if not isinstance(remote, dict):
                raise AnsibleFilterError("nats rotate: %s: nats_server_leafnode_remotes[%d]: expected a mapping" % (host, i))
            account, user = remote.get("account"), remote.get("user")
            if remote.get("system_account") and not account:
                account, user = system_account, user or system_user
            if account and user:
                found.setdefault("%s/%s" % (account, user), []).append(host)
    return found


def _job_users(jobs, creds_dir):
    """{"ACCOUNT/user": [host, ...]} of the Spark jobs whose creds are the store's (``<creds_dir>/ACCOUNT/user.creds``);
    a job reading with creds from elsewhere is not the fleet's to rotate."""
    prefix = str(creds_dir or "").rstrip("/") + "/"
    found = {}
    for host, src in sorted((jobs or {}).items()):
        src = str(src or "")
        key = src[len(prefix):-len(".creds")] if creds_dir and src.startswith(prefix) and src.endswith(".creds") else ""
        if key.count("/") == 1:
            found.setdefault(key, []).append(host)
    return found


def nats_rotate_plan(accounts, hostvars, hosts, users="all", signing_keys=None, system_account="SYS",
                     system_user="sys", jobs=None, creds_dir=None):
    """{"users": [declared nsc_user options plus account, key (ACCOUNT/user) and rotate],
    "signing": [declared items of the accounts with a signing key, plus rotate (selected)],
    "leaf_users": {"ACCOUNT/user": [hosts]}, "job_users": {"ACCOUNT/user": [hosts]}}.

    ``users`` is ``all`` (every user a leaf remote or a Spark job connects as), a list of ``ACCOUNT/user``, or empty.
    ``jobs`` maps the Spark job's hosts to their ``spark_job_creds_src``; those under ``creds_dir`` count.
    The users returned are the leaf remotes' and jobs' users (re-issued when due, so their renewal reaches the hosts
    here too) and the selected ones, with ``rotate`` set on the selected."""
    declared = {}
    for account in accounts or []:
        for user in account.get("users") or []:
            declared["%s/%s" % (account["name"], user["name"])] = dict(user, account=account["name"])
    job = _job_users(jobs, creds_dir)
    leaf = _leaf_users(hostvars, hosts, system_account, system_user)
    on_hosts = set(leaf) | set(job)
    system = "%s/%s" % (system_account, system_user)
    if users in (None, "", "none"):
        users = []
    if users == "all":
        selected = sorted(key for key in on_hosts if key != system and key in declared)
    elif isinstance(users, (list, tuple)):
        selected = []
        for i, key in enumerate(users):
            where = "nats_fleet_rotate_users[%d]" % i
            if not isinstance(key, str) or key.count("/") != 1:
                raise AnsibleFilterError("nats rotate: %s: expected ACCOUNT/user, got %r" % (where, key))
            if key == system:
                raise AnsibleFilterError("nats rotate: %s: %s is the operator's system user; its key is not "
                                         "rotated by this play" % (where, key))
            if key not in declared:
                raise AnsibleFilterError("nats rotate: %s: no user %r in nats_accounts (declared: %s)" % (
                    where, key, ", ".join(sorted(declared)) or "none"))
            selected.append(key)
    else:
        raise AnsibleFilterError("nats rotate: nats_fleet_rotate_users: expected 'all' or a list of ACCOUNT/user, got %r"
                                 % (users,))
    by_name = dict((account["name"], account) for account in accounts or [])
    rotated = set()
    for i, name in enumerate(signing_keys or []):
        where = "nats_fleet_rotate_signing_keys[%d]" % i
        if name not in by_name:
            raise AnsibleFilterError("nats rotate: %s: no account %r in nats_accounts" % (where, name))
        if not by_name[name].get("signing_key"):
            raise AnsibleFilterError("nats rotate: %s: account %r has no signing key (signing_key: true) to rotate"
                                     % (where, name))
        rotated.add(name)
    # every account with a signing key: a key an earlier run replaced may still wait to be retired
    signing = [dict(account, rotate=account["name"] in rotated) for account in accounts or []
               if account.get("signing_key")]
    out = []
    for key in sorted(set(selected) | set(k for k in on_hosts if k in declared)):
        out.append(dict(declared[key], key=key, rotate=key in selected))
    return dict(users=out, signing=signing, leaf_users=leaf, job_users=job)


def nats_rotate_moved(issued, signing=None):
    """{"moved": [...], "pending": [...], "retiring": {account: [signing keys]}}, users as ``ACCOUNT/user``,
    from the registered results of the nsc_user loop (``issued``) and the nsc_account loop over the
    accounts with a signing key (``signing``): moved users have new creds (new key, renewal, re-issue
    by a new signing key) or a replaced key not revoked yet (``pending``), or belong to an account
    whose replaced signing keys are not retired yet (``retiring``) - also from an earlier run that
    stopped before its revocation."""
    moved, pending = set(), set()
    retiring = {}
    for result in (signing or {}).get("results") or []:
        moved.update("%s/%s" % (result["item"]["name"], user) for user in result.get("reissued_users") or [])
        if result.get("previous_signing_keys"):
            retiring[result["item"]["name"]] = sorted(result["previous_signing_keys"])
    for result in (issued or {}).get("results") or []:
        key = "%s/%s" % (result["item"]["account"], result["item"]["name"])
        if result.get("changed") or result["item"]["account"] in retiring:
            moved.add(key)
        if result.get("previous_keys"):
            pending.add(key)
    return dict(moved=sorted(moved | pending), pending=sorted(pending), retiring=retiring)


def nats_rotate_links(remotes, credentials, creds_dir):
    """The leaf remotes' creds files on a host: [{"key": "ACCOUNT/user", "account": public key, "src", "dest"}].

    ``remotes`` are the resolved remotes (``nats_fleet_leaf_remotes``), ``credentials`` the nats_server
    role's files for them (``nats_server_remote_credentials``, one per remote with ``credentials_src``, in order)."""
    with_creds = [remote for remote in remotes or [] if remote.get("credentials_src")]
    if len(with_creds) != len(credentials or []):
        raise AnsibleFilterError("nats rotate: %d leaf remotes with creds but %d creds files" % (
            len(with_creds), len(credentials or [])))
    prefix = str(creds_dir).rstrip("/") + "/"
    links = []
    for remote, files in zip(with_creds, credentials):
        src = remote["credentials_src"]
        key = src[len(prefix):-len(".creds")] if src.startswith(prefix) and src.endswith(".creds") else None
        links.append(dict(key=key, account=remote.get("account"), src=files["src"], dest=files["dest"]))
    return links


class FilterModule(object):
    def filters(self):
        return {"nats_rotate_plan": nats_rotate_plan, "nats_rotate_moved": nats_rotate_moved,
                "nats_rotate_links": nats_rotate_links}
