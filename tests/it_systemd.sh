#!/bin/sh
# it_systemd.sh -- systemd/attuned.service passes `systemd-analyze verify`
# and scores 2.0 or lower in `systemd-analyze security --offline=yes`; the
# settings CUDA needs stay out of it; its device policy lets the service
# open the GPU nodes of a Jetson under JetPack 6 and of a discrete NVIDIA
# GPU, and nothing else of theirs (tests/unit_devices.py over the fixtures
# of tests/inputs/devnodes/); docs/fleet.md's drop-in for a fleet server
# (IPAddressAllow=) verifies on top of it and opens exactly the server's
# address. Skipped (77) without systemd-analyze.
set -eu

if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "skip: systemd-analyze not found"
    exit 77
fi
src=${ATTUNE_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
unit=$src/systemd/attuned.service
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# verify wants ExecStart's binary to exist: use the build's (or a stand-in)
bin=${ATTUNED_BIN:-}
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
    bin=$tmp/attuned
    printf '#!/bin/sh\nexit 0\n' >"$bin"
    chmod +x "$bin"
fi
sed "s#/usr/local/bin/attuned#$bin#" "$unit" >"$tmp/attuned.service"

if out=$(systemd-analyze verify "$tmp/attuned.service" 2>&1) && [ -z "$out" ]; then
    ok "systemd-analyze verify is clean"
else
    bad "systemd-analyze verify: $out"
fi

sec=$(systemd-analyze security --offline=yes "$tmp/attuned.service" 2>&1 || true)
score=$(printf '%s\n' "$sec" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
if [ -n "$score" ] && awk "BEGIN { exit !($score <= 2.0) }"; then
    ok "security exposure $score <= 2.0"
else
    printf '%s\n' "$sec" | grep '✗' || true
    bad "security exposure '$score' > 2.0"
fi

# what the brief requires, and what CUDA forbids
for want in '^Type=notify$' '^DynamicUser=yes$' '^StateDirectory=attune$' \
    '^LoadCredential=token:/etc/attune/token$' '^IPAddressAllow=localhost$' \
    '^IPAddressDeny=any$' '^NoNewPrivileges=yes$' '^ProtectSystem=strict$' \
    '^ProtectHome=yes$' '^PrivateTmp=yes$' '^CapabilityBoundingSet=$' \
    '^SystemCallFilter=@system-service$' \
    '^RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX AF_NETLINK$' \
    '^DeviceAllow=/dev/nvidiactl rw$' '^DeviceAllow=/dev/nvidia-uvm rw$' \
    '^DeviceAllow=char-nvidia-frontend rw$' '^ExecStart=/usr/local/bin/attuned --db /var/lib/attune/attune.db' \
    '^DeviceAllow=/dev/nvmap rw$' '^DeviceAllow=/dev/nvgpu/igpu0/ctrl rw$' \
    '^SupplementaryGroups=video$' '^PrivateUsers=no$' '^MemoryMax=75%$'; do
    if grep -q -- "$want" "$unit"; then ok "has $want"; else bad "lacks $want"; fi
done
for forbidden in '^MemoryDenyWriteExecute=' '^ProcSubset=' '^PrivateDevices=yes' \
    '^SystemCallFilter=.*memfd_create'; do
    if grep -q -- "$forbidden" "$unit"; then bad "must not set $forbidden (CUDA)"; else ok "no $forbidden"; fi
done

# GPU device nodes: a Jetson's (JetPack 6) and a discrete GPU's, each
# opened rw (device policy and the node's mode and group), and the hosts'
# other devices closed
py=${ATTUNE_PYTHON:-python3}
if command -v "$py" >/dev/null 2>&1; then
    if "$py" "$src/tests/unit_devices.py" "$unit" "$src"/tests/inputs/devnodes/*.txt >"$tmp/dev" 2>&1; then
        ok "device nodes: $(grep -c '^ok' "$tmp/dev") checks over tests/inputs/devnodes/"
    else
        grep -v '^ok' "$tmp/dev"
        bad "device nodes (tests/unit_devices.py)"
    fi
else
    echo "skip device nodes: no python3"
fi

# docs/fleet.md's drop-in for a remote fleet server: it verifies on top of
# the unit, its ExecStart is the unit's own plus --fleet, and the one
# address it allows is the server's of its URL
doc=$src/docs/fleet.md
mkdir -p "$tmp/attuned.service.d"
awk '/tests\/it_systemd.sh checks this drop-in/ {on = 1; next}
     on && /^ *```ini/ {inb = 1; next}
     inb && /^ *```/ {exit}
     inb {sub(/^   /, ""); print}' "$doc" >"$tmp/fleet.conf"
if ! grep -q '^IPAddressAllow=' "$tmp/fleet.conf"; then
    bad "no fleet drop-in with IPAddressAllow= found in docs/fleet.md"
else
    sed "s#/usr/bin/attuned#$bin#" "$tmp/fleet.conf" >"$tmp/attuned.service.d/fleet.conf"
    if out=$(cd "$tmp" && systemd-analyze verify "$tmp/attuned.service" 2>&1) && [ -z "$out" ]; then
        ok "the fleet drop-in verifies on top of the unit"
    else
        bad "fleet drop-in: systemd-analyze verify: $out"
    fi
    sec=$(systemd-analyze security --offline=yes "$tmp/attuned.service" 2>&1 || true)
    if printf '%s\n' "$sec" | grep -q 'IPAddressDeny=.*non-localhost entries'; then
        ok "with the drop-in the unit allows a non-loopback address"
    else
        bad "the drop-in's IPAddressAllow= is not in force: $(printf '%s\n' "$sec" | grep IPAddress)"
    fi
    score=$(printf '%s\n' "$sec" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
    if [ -n "$score" ] && awk "BEGIN { exit !($score <= 2.0) }"; then
        ok "with the drop-in: security exposure $score <= 2.0"
    else
        bad "with the drop-in: security exposure '$score'"
    fi
    allow=$(sed -n 's/^IPAddressAllow=//p' "$tmp/fleet.conf")
    host=$(sed -n 's#.*--fleet postgresql://[^@]*@\([^/:]*\).*#\1#p' "$tmp/fleet.conf")
    [ -n "$host" ] && [ "$allow" = "$host" ] && ok "IPAddressAllow=$allow is the --fleet URL's server" ||
        bad "IPAddressAllow='$allow' but the --fleet URL's server is '$host'"
    base=$(sed -n 's/^ExecStart=\(.*\)/\1/p' "$src/systemd/attuned.service" | sed 's#/usr/local/#/usr/#g')
    mine=$(sed -n 's/^ExecStart=\(..*\) --fleet .*/\1/p' "$tmp/fleet.conf")
    [ "$base" = "$mine" ] && ok "the drop-in's ExecStart= is the unit's own plus --fleet" ||
        bad "the drop-in's ExecStart= differs from the unit's: '$mine' vs '$base'"
    grep -q '^IPAddressDeny=any$' "$unit" && ! grep -q '^IPAddressDeny' "$tmp/fleet.conf" &&
        ok "IPAddressDeny=any stays" || bad "the drop-in changes IPAddressDeny="
fi

exit $fail
