#!/usr/bin/env bash
# What the scheduler takes from its spool (docs/run.md, The spool):
#   - under umask 000 the run directory is 0750 and the spool 0700;
#   - a symlink entry (to a file outside, with known content), a FIFO entry, an entry owned by
#     another uid and an entry over 1 MiB are rejected with a reason that names the entry, unread:
#     the FIFO does not hang the round, and no byte of theirs reaches events.jsonl or status.json;
#   - an entry of 10 MB, or whose origin is over 4096 bytes, is rejected; events.jsonl stays small;
#   - a spool that is a symlink is refused before the run starts;
#   - a spool whose mode changes while the run goes is read no more: the run says so once (event
#     spool_refused, stderr, status.json), leaves the entry unread, and submit refuses the run.
# Usage: run_spool_trust.sh <recmix binary> <source dir>
set -euo pipefail
recmix=$1
source "$(dirname "$0")/../lib.sh"
scratch spooltrust
cd "$work"
umask 000

"$recmix" data synth -o train.h5 --rows 2k --tables 2 --table-rows 50,7 --dense 4 --seed 2 > /dev/null
job_toml name=small ranks=1 steps=5 > small.toml
printf 'include = ["small.toml"]\n[scheduler]\nround_interval_s = 0.1\n' > one.toml

# The entries are in the spool before the run's first round takes it.
mkdir -p d/spool
echo "SECRET-CONTENT-$$" > secret.txt
ln -s "$work/secret.txt" d/spool/01-link.json
mkfifo d/spool/02-fifo.json
printf '{"spec_text": "x", "origin": "SECRET-CONTENT-owned", "base_dir": "."}' > d/spool/03-owned.json
chown 12345 d/spool/03-owned.json
head -c $((2 << 20)) /dev/zero | tr '\0' 'A' > d/spool/04-big.json
python3 -c "
import json
print(json.dumps({'spec_text': open('small.toml').read().replace('small', 'long'), 'origin': 'O' * 10000000, 'base_dir': '.'}))
" > d/spool/05-origin.json
python3 -c "
import json
print(json.dumps({'spec_text': open('small.toml').read().replace('small', 'long2'), 'origin': 'P' * 5000, 'base_dir': '.'}))
" > d/spool/06-origin.json

timeout 60 "$recmix" run one.toml --run-dir d -q > run.out 2>&1 || { cat run.out; fail "the run failed or hung"; }
[[ $(stat -c %a d) == 750 ]] || fail "the run directory is $(stat -c %a d) under umask 000, not 750"
[[ $(stat -c %a d/spool) == 700 ]] || fail "the spool is $(stat -c %a d/spool) under umask 000, not 700"
for e in 01-link 02-fifo 03-owned 04-big 05-origin 06-origin; do
  grep -q "\"file\":\"$e.json\"" d/events.jsonl || { cat d/events.jsonl; fail "no rejection of $e.json in events.jsonl"; }
  [[ -e d/spool/rejected/$e.json.reason || -L d/spool/rejected/$e.json ]] || fail "$e.json is not in spool/rejected"
done
grep -q "symlink" d/spool/rejected/01-link.json.reason || fail "the symlink's reason does not say so"
grep -q "owned by uid 12345" d/spool/rejected/03-owned.json.reason || fail "the foreign entry's reason names no owner"
grep -q "over the limit" d/spool/rejected/04-big.json.reason || fail "the big entry's reason names no limit"
grep -q "over the limit" d/spool/rejected/05-origin.json.reason || fail "the 10 MB entry's reason names no limit"
grep -q "field 'origin' is longer than 4096 bytes" d/spool/rejected/06-origin.json.reason || fail "no origin limit"
if grep -q SECRET-CONTENT d/events.jsonl d/status.json; then fail "an entry's content reached events.jsonl or status.json"; fi
(( $(stat -c %s d/events.jsonl) < 100000 )) || fail "events.jsonl is $(stat -c %s d/events.jsonl) bytes"

# A spool that is a symlink (to a folder another user could write) is refused before any work.
mkdir -p e elsewhere
ln -s ../elsewhere e/spool
if "$recmix" run one.toml --run-dir e -q > e.out 2>&1; then fail "a run with a symlinked spool ran"; fi
grep -q "spool/ is not a directory (a symlink?)" e.out || { cat e.out; fail "the symlinked spool's error does not say so"; }

# The spool's mode changes while the run goes: it is read no more, and the run goes on.
umask 022
job_toml name=later ranks=1 steps=5 > later.toml
"$recmix" run one.toml --run-dir g --stay-open -q > g.out 2> g.err &
pid=$!
for _ in $(seq 600); do [[ -f g/status.json ]] && break; sleep 0.1; done
[[ -f g/status.json ]] || fail "the stay-open run wrote no status.json"
chmod 0777 g/spool
printf '{"spec_text": "name = \"x\"", "origin": "o", "base_dir": "."}' > g/spool/99-late.json
for _ in $(seq 600); do grep -q '"spool_refused"' g/events.jsonl && break; sleep 0.1; done
grep -q '"event":"spool_refused".*mode is 777' g/events.jsonl || { cat g/events.jsonl; fail "no spool_refused event naming the mode"; }
[[ -f g/spool/99-late.json && ! -e g/spool/accepted/99-late.json && ! -e g/spool/rejected/99-late.json ]] ||
  fail "an entry of the refused spool was taken"
for _ in $(seq 100); do grep -q '"spool_refused": "spool' g/status.json && break; sleep 0.1; done
grep -q '"spool_refused": "spool' g/status.json || { cat g/status.json; fail "status.json does not say the spool is refused"; }
if "$recmix" submit later.toml --run g > sub.out 2>&1; then fail "submit to a refused spool succeeded"; fi
grep -q "takes no more jobs from its spool" sub.out || { cat sub.out; fail "submit's error does not name the refused spool"; }
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
# Its only job had finished: the run ends as finished.
[[ $rc == 0 ]] || { cat g.out g.err; fail "the run exited $rc on SIGTERM, not 0"; }
[[ $(grep -c "the run takes no more jobs" g.err) == 1 ]] || { cat g.err; fail "the refusal was not said once on stderr"; }
echo "run_spool_trust: ok"
