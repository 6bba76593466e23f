#!/bin/sh
# clean_root.sh -- the packages on a clean Debian: installed with dpkg into
# a fresh minimal Debian root (mmdebstrap --variant=minbase) that has been
# given only what their Depends fields name, then attuned started from it
# (on the CPU, with the unit's own arguments) and asked over HTTP, the
# Python client imported, and the maintainer scripts' handling of the
# unit's state by the real deb-systemd-helper: enabled on the first
# install, left disabled by an upgrade after the admin disabled it, the
# token kept, purge forgetting both. Not a ctest (it downloads about 100 MB
# of Debian packages and runs as root): run by hand, docs/deploy.md says
# when it was last run.
#
#   tests/clean_root.sh BUILD_DIR [SUITE]      (SUITE: bookworm by default)
#
# Needs root, mmdebstrap (apt-get install mmdebstrap), unshare, curl and
# the network. The root is made under $TMPDIR and removed at the end.
set -eu
build=${1:?usage: clean_root.sh BUILD_DIR [SUITE]}
suite=${2:-bookworm}
build=$(cd "$build" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "clean_root.sh: needs root (mmdebstrap, chroot)"; exit 2; }
for t in mmdebstrap unshare curl cpack dpkg-deb; do
    command -v $t >/dev/null 2>&1 || { echo "clean_root.sh: $t not found"; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

(cd "$build" && cpack -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1) || { cat "$tmp/cpack.log"; exit 1; }
arch=$(dpkg --print-architecture)
root=$tmp/root
# ATTUNE_CLEAN_ROOT_TAR=FILE keeps the fresh root as a tarball for the
# next run (made when FILE is missing, unpacked when it is there)
tar=${ATTUNE_CLEAN_ROOT_TAR:-}
if [ -n "$tar" ] && [ -f "$tar" ]; then
    mkdir -p "$root" && tar -C "$root" -xf "$tar"
else
    echo "== mmdebstrap --variant=minbase $suite (downloads)"
    mmdebstrap --quiet --variant=minbase "$suite" "${tar:-$root}" >"$tmp/mmdebstrap.log" 2>&1 ||
        { tail -20 "$tmp/mmdebstrap.log"; exit 1; }
    [ -z "$tar" ] || { mkdir -p "$root" && tar -C "$root" -xf "$tar"; }
fi
ok "a minimal $suite root: $(chroot "$root" dpkg-query -W | wc -l) packages"
mkdir -p "$root/tmp/debs"
cp "$tmp"/pkg/*.deb "$root/tmp/debs/"

# what the Depends of the packages installed here name, less the packages
# themselves (their names and versions, alternatives as apt reads them)
ours="attune libattune-client2 libattune-lookup1 python3-attune-client"
deps=""
for p in $ours; do
    d=$(dpkg-deb -f "$tmp"/pkg/${p}_*.deb Depends)
    deps="$deps${deps:+, }$d"
done
# (apt-get takes the names: the first of alternatives; dpkg -i checks the
# versions)
want=$(printf '%s\n' "$deps" | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/^ *//; s/ *$//' | grep . |
    grep -Evx "$(echo "$ours" | tr ' ' '|')" | sort -u)
echo "== the Depends: $(dpkg-deb -f "$tmp"/pkg/attune_*.deb Depends)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# the rest in a private mount namespace (proc and dev for the chroot)
unshare -m --propagation private sh -eu -c '
root=$1; port=$2; arch=$3; shift 3
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
inroot() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
echo "== apt-get install --no-install-recommends $*"
inroot apt-get update -qq >/dev/null
inroot apt-get install -y -qq --no-install-recommends "$@" >/dev/null
echo "== dpkg -i"
inroot sh -c "dpkg -i /tmp/debs/attune_*_$arch.deb /tmp/debs/libattune-client2_*_$arch.deb /tmp/debs/libattune-lookup1_*_$arch.deb /tmp/debs/python3-attune-client_*_all.deb" >/tmp/dpkg.$$ 2>&1 ||
    { cat /tmp/dpkg.$$; echo "FAIL dpkg -i"; exit 1; }
echo "ok   dpkg -i of attune, libattune-client2, libattune-lookup1, python3-attune-client: $(inroot dpkg-query -W -f="\${Status}\n" attune)"
inroot attune devices
args=$(sed -n "s/^ExecStart=[^ ]* //p" "$root/usr/lib/systemd/system/attuned.service" | sed "s/--port 7373/--port $port/")
mkdir -p "$root/var/lib/attune"
inroot sh -c "cd /var/lib/attune && exec /usr/bin/attuned $args --no-default-grid --token-file /etc/attune/token" >/tmp/attuned.$$ 2>&1 &
pid=$!
i=0
until curl -sf "http://127.0.0.1:$port/v1/health" >/tmp/health.$$ 2>/dev/null; do
    i=$((i + 1)); [ $i -lt 100 ] || break; sleep 0.1
done
if grep -q "\"status\":\"ok\"" /tmp/health.$$ 2>/dev/null; then
    echo "ok   attuned started in the clean root, on the CPU: $(cat /tmp/health.$$)"
    curl -s "http://127.0.0.1:$port/v1/devices" | head -c 300; echo
else
    cat /tmp/attuned.$$; echo "FAIL attuned did not serve"
fi
kill $pid; wait $pid 2>/dev/null || true
rm -f /tmp/attuned.$$ /tmp/health.$$ /tmp/dpkg.$$
inroot python3 -c "import attune_client, sys; print(\"ok   python3 imports attune_client from\", attune_client.__file__)"

# the unit state, by the real deb-systemd-helper (no systemd runs here)
wants=$root/etc/systemd/system/multi-user.target.wants/attuned.service
[ -L "$wants" ] && echo "ok   first install: the unit is enabled ($(readlink "$wants"))" || echo "FAIL first install: not enabled"
tok=$(cat "$root/etc/attune/token")
[ "$(stat -c %a "$root/etc/attune/token")" = 600 ] && echo "ok   token 0600" || echo "FAIL token mode"
rm "$wants"   # what systemctl disable attuned does
inroot sh -c "dpkg -i /tmp/debs/attune_*_$arch.deb" >/dev/null 2>&1 || echo "FAIL dpkg -i again (upgrade)"
[ ! -e "$wants" ] && echo "ok   upgrade after the admin disabled it: still disabled" || echo "FAIL upgrade enabled the unit again"
[ "$(cat "$root/etc/attune/token")" = "$tok" ] && echo "ok   upgrade kept the token" || echo "FAIL token changed"
inroot dpkg --purge attune >/dev/null 2>&1 || echo "FAIL dpkg --purge attune"
[ ! -e "$root/etc/attune" ] && [ ! -e "$root/var/lib/systemd/deb-systemd-helper-enabled/attuned.service.dsh-also" ] &&
    echo "ok   purge removed the token and the unit state" || echo "FAIL purge left state: $(ls "$root/etc/attune" "$root/var/lib/systemd/deb-systemd-helper-enabled" 2>&1 | tr "\n" " ")"
inroot sh -c "dpkg -i /tmp/debs/attune_*_$arch.deb" >/dev/null 2>&1
[ -L "$wants" ] && echo "ok   a new install after purge enables it again" || echo "FAIL reinstall after purge: not enabled"
umount "$root/dev" "$root/proc"
' sh "$root" "$port" "$arch" $want >"$tmp/out" 2>&1 || true
cat "$tmp/out"
grep -q '^FAIL' "$tmp/out" && fail=1
grep -q '^ok   attuned started' "$tmp/out" || fail=1
exit $fail
