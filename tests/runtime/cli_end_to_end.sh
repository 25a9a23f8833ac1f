#!/usr/bin/env bash
# End to end through the recmix binary and the mpirun wrapper: synthesise data, train on 2 ranks,
# evaluate the checkpoint, resume; convert the real Criteo rows and train on them; and check that
# bad input (a wrong job spec, a missing file, bad data on one rank) ends with one clear error.
# Usage: cli_end_to_end.sh <recmix binary> <source dir> <shared dir>
set -euo pipefail
recmix=$1 src=$2 shared=$3
source "$(dirname "$0")/../lib.sh"
scratch e2e
mpirun=("$src/launch/recmix-mpirun")

"$recmix" data synth -o "$work/train.h5" --rows 20k --tables 4 --table-rows 100,2000,30,500 --dense 5 --seed 3 >/dev/null
"$recmix" data synth -o "$work/eval.h5" --rows 4k --tables 4 --table-rows 100,2000,30,500 --dense 5 --seed 3 \
  --first-row 20000 >/dev/null 2>&1 || cp "$work/train.h5" "$work/eval.h5"

job_toml name=e2e run_dir=run lr=0.05 eval=eval.h5 steps=120 checkpoint=60 > "$work/job.toml"

# Train on 2 ranks: progress, metrics, checkpoints, final evaluation.
"${mpirun[@]}" -np 2 "$recmix" train "$work/job.toml" > "$work/train.out" 2> "$work/train.err" || {
  cat "$work/train.err"; fail "training on 2 ranks failed"; }
grep -q "step 120/120" "$work/train.err" || fail "no final progress line"
grep -q "final: step 120" "$work/train.out" || fail "no final summary"
grep -q "cpu (\(oneDNN\|OpenBLAS\) GEMM" "$work/train.err" || fail "the log does not name the GEMM library"
test -s "$work/run/metrics.jsonl" || fail "no metrics.jsonl"
grep -q '"type":"eval"' "$work/run/metrics.jsonl" || fail "no eval metrics"
ckpt=$(ls "$work/run/checkpoints"/ckpt-*.h5 | tail -n 1)
[[ $(basename "$ckpt") == ckpt-000000120.h5 ]] || fail "unexpected last checkpoint $ckpt"

# Evaluate the checkpoint on 1 rank: the same AUC as the trainer's final evaluation.
"$recmix" eval "$ckpt" "$work/eval.h5" > "$work/eval.out"
auc_train=$(sed -n 's/.*eval AUC \([0-9.]*\).*/\1/p' "$work/train.out")
auc_eval=$(sed -n 's/.*AUC \([0-9.]*\).*/\1/p' "$work/eval.out")
[[ -n "$auc_train" && "$auc_train" == "$auc_eval" ]] || fail "eval AUC $auc_eval differs from training's $auc_train"
# On the other GEMM library (--gemm) the AUC differs by rounding only.
"$recmix" eval "$ckpt" "$work/eval.h5" --gemm openblas > "$work/eval-openblas.out"
auc_openblas=$(sed -n 's/.*AUC \([0-9.]*\).*/\1/p' "$work/eval-openblas.out")
awk -v a="$auc_train" -v b="$auc_openblas" 'BEGIN { d = a - b; exit !(b != "" && d < 1e-3 && d > -1e-3) }' ||
  fail "eval AUC with --gemm openblas $auc_openblas is not close to training's $auc_train"

# 16-bit tables: a bf16 job trains on 2 ranks and logs it; its checkpoint (fp32 arrays, attribute
# storage = bf16) evaluates as the job stored it, and in fp32 (exact: the same AUC); the fp32
# checkpoint evaluates with fp16 tables (rounded: close).
sed -e 's/^name = "e2e"/name = "e2e-bf16"/' -e 's/^run_dir = "run"/run_dir = "run-bf16"/' "$work/job.toml" > "$work/bf16.toml"
printf '[precision]\nembedding = "bf16"\n' >> "$work/bf16.toml"
"${mpirun[@]}" -np 2 "$recmix" train "$work/bf16.toml" --steps 60 > "$work/bf16.out" 2> "$work/bf16.err" || {
  cat "$work/bf16.err"; fail "training with bf16 tables failed"; }
grep -q "embedding tables bf16 (updates rounded stochastically), rows converted" "$work/bf16.err" ||
  fail "the log does not name the tables' storage and how their rows are converted"
bf16_ckpt="$work/run-bf16/checkpoints/ckpt-000000060.h5"
auc_bf16=$(sed -n 's/.*eval AUC \([0-9.]*\).*/\1/p' "$work/bf16.out")
auc_as_bf16=$("$recmix" eval "$bf16_ckpt" "$work/eval.h5" | sed -n 's/.*AUC \([0-9.]*\).*/\1/p')
auc_as_fp32=$("$recmix" eval "$bf16_ckpt" "$work/eval.h5" --tables fp32 | sed -n 's/.*AUC \([0-9.]*\).*/\1/p')
[[ -n "$auc_bf16" && "$auc_as_bf16" == "$auc_bf16" && "$auc_as_fp32" == "$auc_bf16" ]] ||
  fail "bf16 checkpoint: AUC $auc_as_bf16 (bf16) and $auc_as_fp32 (fp32) against training's $auc_bf16"
auc_fp16=$("$recmix" eval "$ckpt" "$work/eval.h5" --tables fp16 | sed -n 's/.*AUC \([0-9.]*\).*/\1/p')
awk -v a="$auc_train" -v b="$auc_fp16" 'BEGIN { d = a - b; exit !(b != "" && d < 1e-3 && d > -1e-3) }' ||
  fail "the fp32 checkpoint with fp16 tables: AUC $auc_fp16, not close to $auc_train"

# Resume on 1 rank for 30 more steps.
"$recmix" train "$work/job.toml" --resume "$ckpt" --steps 150 > /dev/null 2> "$work/resume.err" || {
  cat "$work/resume.err"; fail "resume failed"; }
grep -q "resumed from .* at step 120" "$work/resume.err" || fail "no resume line"
test -f "$work/run/checkpoints/ckpt-000000150.h5" || fail "no checkpoint after resume"

# Real Criteo rows: convert both formats, train a few steps on them.
# (36 of these 200 rows lack trailing fields: allowed past the 1% default)
"$recmix" data convert criteo -q --hash-rows 1000 --max-malformed 20% -o "$work/criteo.h5" "$shared/data/criteo/kaggle_sample_a.tsv" \
  "$shared/data/criteo/kaggle_sample_b.tsv" > /dev/null 2>&1
cat > "$work/criteo.toml" <<TOML
name = "criteo"
run_dir = "criteo-run"
[data]
train = "criteo.h5"
eval = "criteo.h5"
[train]
batch_size = 32
steps = 12
TOML
"${mpirun[@]}" -np 2 "$recmix" train "$work/criteo.toml" > "$work/criteo.out" 2> "$work/criteo.err" || {
  cat "$work/criteo.err"; fail "training on the real Criteo rows failed"; }
grep -q "26 tables, 13 dense features" "$work/criteo.err" || fail "criteo model shape not reported"

# Bad input: one clear error line naming the culprit, exit status 1, within seconds.
expect_error() {  # expect_error <pattern> <command...>
  local pattern=$1; shift
  local start=$SECONDS
  if "$@" > "$work/bad.out" 2> "$work/bad.err"; then fail "'$*' succeeded"; fi
  grep -q "$pattern" "$work/bad.err" || { cat "$work/bad.err"; fail "no '$pattern' in the error of '$*'"; }
  (( SECONDS - start < 60 )) || fail "'$*' took $((SECONDS - start)) s to fail"
}
sed 's/batch_size = 128/batch_sise = 128/' "$work/job.toml" > "$work/typo.toml"
expect_error "unknown key 'train.batch_sise'" "$recmix" train "$work/typo.toml"
sed 's/lr = 0.05/lr = -1/' "$work/job.toml" > "$work/neg.toml"
expect_error "'optimizer.lr' must be between" "$recmix" train "$work/neg.toml"
sed 's/train = "train.h5"/train = "missing.h5"/' "$work/job.toml" > "$work/missing.toml"
# Each bad job in a run directory of its own: the good job's "run" holds a run, which is refused.
expect_error "missing.h5" "${mpirun[@]}" -np 2 "$recmix" train "$work/missing.toml" --run-dir "$work/run-missing"
{ cat "$work/job.toml"; printf '[device]\ngemm = "mkl"\n'; } > "$work/gemm.toml"
expect_error "device.gemm" "$recmix" train "$work/gemm.toml" --run-dir "$work/run-gemm"
{ cat "$work/job.toml"; printf '[device]\nmemory_capacity = "64KiB"\n'; } > "$work/oom.toml"
expect_error "out of memory" "$recmix" train "$work/oom.toml" --run-dir "$work/run-oom"
expect_error "not a recmix checkpoint\|not a readable\|cannot open\|failed" "$recmix" eval "$work/train.h5" "$work/eval.h5"
# Bad data on one rank only: row 100 of the first global batch (rows 0-127) is rank 1's.
cp "$work/train.h5" "$work/nan.h5"
/usr/bin/python3 -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r+'); f['dense'][100, 2] = float('nan')" "$work/nan.h5"
sed 's/train = "train.h5"/train = "nan.h5"/' "$work/job.toml" > "$work/nan.toml"
expect_error "nan.h5.*row 100\|row 100.*nan.h5" "${mpirun[@]}" -np 2 "$recmix" train "$work/nan.toml" --run-dir "$work/run-nan"
grep -q "rank 1\|data error" "$work/bad.err" || fail "the failing rank is not named"
# The simulator on a slice of the real Philly trace, every policy side by side and as JSON.
"$recmix" sim --trace "$shared/traces/philly_jobs.csv" --gpus 64 --max-jobs 300 --policy all > "$work/sim.out" 2>&1 || {
  cat "$work/sim.out"; fail "recmix sim failed"; }
grep -q "memory violations *0 *0 *0 *0 *0 *0" "$work/sim.out" || { cat "$work/sim.out"; fail "sim: memory violations"; }
"$recmix" sim --trace "$shared/traces/philly_jobs.csv" --gpus 64 --max-jobs 100 --policy fifo --json "$work/sim.json" \
  > /dev/null 2>&1 || fail "recmix sim --json failed"
/usr/bin/python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$work/sim.json" || fail "sim --json is not JSON"
# A trace by name, and --json - with stdout carrying the JSON alone.
"$recmix" sim --trace philly --traces-dir "$shared/traces" --gpus 64 --max-jobs 100 --policy fifo --quiet --json - \
  2>/dev/null | /usr/bin/python3 -m json.tool > /dev/null || fail "sim --trace philly --json - is not JSON on stdout"
# Measured pairs (recmix pairs' format) as the ground truth and profiles of dlrm-small and dlrm-medium.
printf '%s\n' type,other,solo_step_s,colocated_step_s,slowdown,samples,dense_share,embedding_share,allreduce_share,data_wait_share,busy_share \
  small,,0.01,,1,30,0.4,0.2,0.1,0.05,0.9 medium,,0.04,,1,20,0.5,0.3,0,0.05,0.7 \
  small,medium,0.01,0.013,1.3,12,,,,, medium,small,0.04,0.064,1.6,12,,,,, > "$work/pairs.csv"
"$recmix" sim --trace philly --traces-dir "$shared/traces" --gpus 64 --max-jobs 100 --mix dlrm-only --policy memory-first \
  --quiet --pairs "$work/pairs.csv" --json - 2>/dev/null | /usr/bin/python3 -c "import json, sys
t = json.load(sys.stdin)['job_types']['dlrm-small']
assert (t['ground_truth'], t['profile'], t['measured_as']) == ('measured', 'measured', ['small']), t" \
  || fail "sim --pairs: dlrm-small does not take the measured pairs"
expect_error "traces-dir" env -u RECMIX_SHARED_DIR "$recmix" sim --trace philly --gpus 8
expect_error "nope.csv" "$recmix" sim --trace "$work/nope.csv" --gpus 8
echo "end-to-end: all checks passed"
