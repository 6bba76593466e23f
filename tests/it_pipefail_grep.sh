#!/bin/sh
# it_pipefail_grep.sh -- no shell script of the tree that sets pipefail
# pipes into `grep -q`: grep -q stops reading at its first match, the
# writer then dies of SIGPIPE once its output outgrows the pipe, and
# pipefail calls the whole pipeline a failure, at random (tests/gpu/
# run.sh's library check did so with `ldconfig -p`, 2026-12-07: a library
# found on one call was unpacked on the next). Read the whole input
# (`grep PAT >/dev/null`) or capture it first. Lines may opt out with a
# trailing `# pipefail-ok` where the writer's output is one short write.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$HERE/..
fails=0
n=0
for f in $(cd "$ROOT" && git ls-files '*.sh' .ci/run 2>/dev/null); do
    grep -q 'pipefail' "$ROOT/$f" || continue
    n=$((n + 1))
    hits=$(grep -nE '\|[[:space:]]*grep[[:space:]]+(-[a-zA-Z]*q[a-zA-Z]*|--quiet)([[:space:]]|$)' "$ROOT/$f" |
        grep -v 'pipefail-ok')
    if [ -n "$hits" ]; then
        echo "FAIL: $f pipes into grep -q under pipefail:"
        echo "$hits"
        fails=$((fails + 1))
    fi
done
if [ $n -eq 0 ]; then
    echo "skipped: no git checkout to list the scripts of"
    exit 77
fi
[ $fails -eq 0 ] || { echo "$fails scripts"; exit 1; }
echo "ok: $n scripts set pipefail; none pipes into grep -q"
