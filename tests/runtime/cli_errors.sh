#!/usr/bin/env bash
# Every error of the recmix command line is printed once, on a line of its own, on stderr, as
# "recmix: <kind>: <message>" (command-line mistakes included, as "usage error"), and the exit
# status is not 0; stdout carries no error. --help still prints its usage on stdout.
#   cli_errors.sh <recmix binary>
set -uo pipefail
recmix=$1
source "$(dirname "$0")/../lib.sh"
scratch cli-errors
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_error() {  # expect_error <kind> <command args...>
  local kind=$1 before=$failures
  shift
  "$recmix" "$@" >"$work/out" 2>"$work/err"
  local rc=$? what="recmix $*"
  ((rc != 0)) || fail "$what: exit status 0"
  local lines
  lines=$(wc -l <"$work/err")
  [[ $lines -eq 1 ]] || fail "$what: $lines lines on stderr, not 1: $(cat "$work/err")"
  [[ -z "$(tail -c 1 "$work/err")" ]] || fail "$what: stderr does not end its line"
  grep -qE "^recmix: ${kind}: .+" "$work/err" || fail "$what: stderr is not 'recmix: ${kind}: ...': $(cat "$work/err")"
  ! grep -q "^recmix: " "$work/out" || fail "$what: an error on stdout: $(cat "$work/out")"
  ((failures > before)) || echo "ok: $what -> $(cat "$work/err")"
}

printf 'name = "x"\n[data]\ntrain = "t.h5"\n[train]\nbatch_size = 0\n' >"$work/bad.toml"
printf 'not a dataset\n' >"$work/bad.h5"

expect_error "usage error" train "$work/missing.toml"
expect_error "usage error" no-such-command
expect_error "usage error" data synth --no-such-option
expect_error "config error" train
expect_error "config error" train "$work/bad.toml"
expect_error "config error" data synth -o "$work/x.h5" --rows abc
expect_error "data error" data inspect "$work/bad.h5"
expect_error "I/O error" report "$work/missing" -o "$work/r.html"

"$recmix" --help >"$work/out" 2>"$work/err" || fail "recmix --help: exit status $?"
grep -q "Usage" "$work/out" || fail "recmix --help: no usage on stdout"
[[ ! -s "$work/err" ]] || fail "recmix --help: wrote to stderr: $(cat "$work/err")"

echo "$failures failure(s)"
((failures == 0))
