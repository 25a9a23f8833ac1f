#!/usr/bin/env bash
# launch/recmix-mpirun: the flags it chooses (--dry-run) and a real 2-rank run that forms one job.
#   mpirun_wrapper_test.sh <recmix-mpirun> <rank_report binary> <listen_probe binary>
set -uo pipefail
wrapper=$1 payload=$2 probe=$3
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() {  # expect <label> <text> <pattern>: fixed-string match
  grep -qF -- "$3" <<<"$2" || fail "$1: '$3' missing in: $2"
}
reject() {
  grep -qF -- "$3" <<<"$2" && fail "$1: '$3' unexpected in: $2"
}

cores=$(nproc)
cmd=$("$wrapper" --dry-run -np 1 "$payload")
expect "1 rank" "$cmd" "-np 1 --bind-to core"
expect "1 rank" "$cmd" "--mca btl_vader_single_copy_mechanism none"
[[ $(id -u) -eq 0 ]] && expect "root" "$cmd" "--allow-run-as-root"
cmd=$("$wrapper" --dry-run -np $((cores + 1)) "$payload" arg1)
expect "more ranks than cores" "$cmd" "--bind-to none --oversubscribe"
expect "more ranks than cores" "$cmd" "$payload arg1"
cmd=$("$wrapper" --dry-run --hostfile /dev/null -np 8 "$payload")
expect "hostfile" "$cmd" "--hostfile /dev/null"
reject "hostfile" "$cmd" "--oversubscribe"
"$wrapper" --dry-run -np zero "$payload" >/dev/null 2>&1 && fail "-np zero was accepted"
"$wrapper" >/dev/null 2>&1 && fail "a missing program was accepted"
"$wrapper" --help | grep -q "Usage: recmix-mpirun" || fail "--help prints no usage"

out=$(timeout 50 "$wrapper" -np 2 "$payload" 2>&1); rc=$?
echo "$out"
((rc == 0)) || fail "2-rank run exited with $rc"
for r in 0 1; do
  grep -qx "rank $r of 2: sum of ranks 1" <<<"$out" || fail "rank $r did not report 'rank $r of 2: sum of ranks 1'"
done

# On one host no rank listens beyond loopback (the TCP transport is left out); given a transport
# of the user's, the wrapper does not add its own.
out=$(timeout 50 "$wrapper" -np 2 "$probe" 2>&1); rc=$?
echo "$out"
((rc == 0)) || fail "a rank listens beyond loopback on one host (exit $rc)"
grep -q "^listeners 0 outside loopback" <<<"$out" || fail "listen_probe reported nothing"
cmd=$("$wrapper" --dry-run -np 2 --mca btl self,vader,tcp "$probe")
expect "user btl" "$cmd" "--mca btl self\\,vader\\,tcp"
reject "user btl" "$cmd" "--mca btl self\\,vader "
reject "hostfile" "$("$wrapper" --dry-run --hostfile /dev/null -np 2 "$probe")" "oob_tcp_if_include lo"
echo "$failures failure(s)"
((failures == 0))
