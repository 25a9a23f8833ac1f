#!/usr/bin/env bash
# Runs a command that must fail: checks it exits non-zero within a time limit (no hang), and
# that stderr holds the expected message exactly once.
#   expect_abort.sh <seconds> <expected message> <command...>
set -u
limit=$1 expected=$2
shift 2
err=$(mktemp)
trap 'rm -f "$err"' EXIT
start=$(date +%s%N)
timeout --kill-after=5 "$((limit * 2))" "$@" 2>"$err" >/dev/null
rc=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
status=0
if ((rc == 0)); then
  echo "FAIL: the command succeeded although a rank failed"; status=1
elif ((rc == 124 || rc == 137)); then
  echo "FAIL: the command hung and was killed after $((limit * 2)) s"; status=1
fi
if ((elapsed_ms >= limit * 1000)); then
  echo "FAIL: took ${elapsed_ms} ms (limit ${limit} s)"; status=1
fi
hits=$(grep -cF -- "$expected" "$err")
if ((hits != 1)); then
  echo "FAIL: expected message found ${hits} times on stderr (want 1): $expected"; status=1
fi
echo "exit code ${rc} after ${elapsed_ms} ms; stderr:"
sed 's/^/  | /' "$err" | head -40
exit $status
