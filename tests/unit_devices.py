#!/usr/bin/env python3
"""unit_devices.py -- which device nodes a systemd unit lets its service
open, on a host described by a fixture (tests/inputs/devnodes/*.txt).

    unit_devices.py UNIT FIXTURE...

For each fixture: every node of ROLE gpu must be reachable (the unit's
device policy allows it rw, and its mode lets the service's transient
user open it rw: other bits, or group bits of a group in
SupplementaryGroups=), every node of ROLE closed must not be allowed by
the device policy. Prints one ok/FAIL line per node; exits 1 on a FAIL.

The device policy is evaluated as systemd (v249-v257) builds it:
DevicePolicy=closed allows /dev/null, zero, full, random, urandom, tty,
ptmx and char-pts (rw), ProtectClock=yes adds char-rtc (r); each
DeviceAllow= is a /dev path (the node at that path on the host, skipped
when absent) or char-/block- and a glob over the names of /proc/devices
(every minor of each matching major). Under PrivateUsers=yes the
supplementary groups are not carried (docs/deploy.md). Used by
tests/it_systemd.sh.
"""
import fnmatch
import sys


def read_unit(path):
    """[(key, value)] of the [Service] section, in order."""
    out, section = [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]" and "=" in line:
                k, v = line.split("=", 1)
                out.append((k.strip(), v.strip()))
    return out


def read_fixture(path):
    nodes, majors = [], []
    with open(path) as f:
        for line in f:
            w = line.split()
            if not w or w[0].startswith("#"):
                continue
            if w[0] == "major":
                majors.append((w[1], int(w[2]), w[3]))
            elif w[0] == "node":
                maj, mnr = w[3].split(":")
                nodes.append(dict(path=w[1], type=w[2], major=int(maj), minor=int(mnr),
                                  mode=int(w[4], 8), group=w[5], role=w[6]))
            else:
                raise ValueError("%s: bad line %r" % (path, line))
    return nodes, majors


def policy(unit, nodes, majors):
    """[(type, major, minor or None, perms)] the unit's device cgroup allows."""
    by_path = {n["path"]: n for n in nodes}
    allow = []

    def add_spec(spec, perms):
        if spec.startswith("/dev/"):
            n = by_path.get(spec)
            if n is not None:
                allow.append((n["type"], n["major"], n["minor"], perms))
        elif spec.startswith("char-") or spec.startswith("block-"):
            t = "c" if spec.startswith("char-") else "b"
            glob = spec.split("-", 1)[1]
            for mt, m, name in majors:
                if mt == t and fnmatch.fnmatchcase(name, glob):
                    allow.append((t, m, None, perms))

    keys = dict(unit)
    pol = keys.get("DevicePolicy", "auto")
    if pol == "auto" and not any(k == "DeviceAllow" for k, _ in unit):
        return None  # no restriction at all
    if pol in ("closed", "auto"):
        for p in ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                  "/dev/tty", "/dev/ptmx"):
            add_spec(p, "rw")
        add_spec("char-pts", "rw")
    if keys.get("ProtectClock") == "yes":
        add_spec("char-rtc", "r")
    for k, v in unit:
        if k == "DeviceAllow":
            if not v:
                allow.clear()
                continue
            w = v.split()
            add_spec(w[0], w[1] if len(w) > 1 else "rwm")
    return allow


def allowed(allow, n, want="rw"):
    if allow is None:
        return True
    got = set()
    for t, m, mi, perms in allow:
        if t == n["type"] and m == n["major"] and (mi is None or mi == n["minor"]):
            got |= set(perms)
    return set(want) <= got


def groups(unit):
    keys = dict(unit)
    if keys.get("PrivateUsers") == "yes":
        return set()
    g = set()
    for k, v in unit:
        if k == "SupplementaryGroups":
            g = set() if not v else g | set(v.split())
    return g


def can_open(n, grps):
    """The service's user (never the owner: a transient uid) opens n rw."""
    other = n["mode"] & 0o006 == 0o006
    group = n["mode"] & 0o060 == 0o060 and n["group"] in grps
    return other or group


def check(unit_path, fixture):
    unit = read_unit(unit_path)
    nodes, majors = read_fixture(fixture)
    allow = policy(unit, nodes, majors)
    grps = groups(unit)
    fails = 0
    name = fixture.rsplit("/", 1)[-1]
    for n in nodes:
        if n["role"] == "gpu":
            pol, acc = allowed(allow, n), can_open(n, grps)
            ok = pol and acc
            why = "" if ok else (" (device policy: %s, mode %o %s, groups %s)" % (
                "allows" if pol else "denies", n["mode"], n["group"], sorted(grps) or "none"))
            print("%s %s: %s opens %s rw%s" % ("ok  " if ok else "FAIL", name, "attuned" if ok
                                                else "attuned cannot", n["path"], why))
        else:
            ok = not allowed(allow, n, "r") and not allowed(allow, n, "w")
            print("%s %s: %s %s" % ("ok  " if ok else "FAIL", name,
                                    "closed:" if ok else "allowed, should be closed:", n["path"]))
        fails += not ok
    return fails


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    fails = sum(check(sys.argv[1], f) for f in sys.argv[2:])
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
