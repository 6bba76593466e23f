#!/usr/bin/env bash
# sass_ops.sh -- count SASS instructions by opcode in the kernels of a
# binary whose (mangled) name matches a pattern: what a kernel change did to
# the instruction mix (needs cuobjdump: the GPU machine has it, the build
# machine does not).
#
# usage: bench/sass_ops.sh BINARY PATTERN [OPCODES]
#   BINARY   an executable, shared library or object with device code
#   PATTERN  an awk regex over the function name, e.g. 'fp8_e4m3.*Li224E'
#   OPCODES  an awk regex of opcodes to count (default: the softmax's and
#            the products' usual ones); 'ALL' counts every opcode
# Prints one line per kernel: its name, then OPCODE=COUNT pairs (static
# counts: instructions in the code, not executed ones).
set -u -o pipefail
[ $# -ge 2 ] || { sed -n 2,13p "$0" >&2; exit 2; }
BIN=$1 PAT=$2 OPS=${3:-'^(FADD|FMUL|FFMA|FMNMX|MUFU|F2FP|PRMT|SHF|LOP3|HGMMA|SHFL|BAR|SYNCS|LDS|STS)$'}
command -v cuobjdump >/dev/null || { echo "sass_ops.sh: no cuobjdump on this machine" >&2; exit 2; }
[ -r "$BIN" ] || { echo "sass_ops.sh: cannot read $BIN" >&2; exit 2; }
cuobjdump --dump-sass "$BIN" 2>/dev/null | awk -v pat="$PAT" -v ops="$OPS" '
    /Function :/ { fn = $3; on = fn ~ pat; if (on) order[++nf] = fn; next }
    on && /\/\*[0-9a-f]+\*\// {
        for (i = 1; i <= NF; i++) if ($i ~ /^\/\*[0-9a-f]+\*\/$/) break;
        op = $(i + 1); if (op ~ /^@/) op = $(i + 2);
        sub(/\..*/, "", op); sub(/;$/, "", op);
        if (ops == "ALL" || op ~ ops) { n[fn, op]++; seen[op] = 1 }
    }
    END {
        for (k = 1; k <= nf; k++) {
            line = order[k];
            for (op in seen) if ((order[k], op) in n) line = line " " op "=" n[order[k], op];
            print line
        }
    }'
