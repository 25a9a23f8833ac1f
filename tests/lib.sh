# Shared by the shell tests (source it after `set -euo pipefail`):
#   scratch <tag>  makes $work, a folder /tmp/recmix-<tag>-XXXXXX removed when the test exits,
#                  or kept and named when KEEP_WORK is set;
#   fail <why>     prints "FAIL: <why>" on stderr and ends the test with status 1;
#   job_toml <key>=<value>...
#                  prints the tests' small job spec: embedding_dim = 8, bottom_mlp = [16, 8],
#                  top_mlp = [16, 1], train = "train.h5" and batch_size = 128 (each may be given
#                  otherwise), and the keys given: name and steps (both required), seed, ranks,
#                  arrival, run_dir, lr (which brings dense = "adagrad" and sparse =
#                  "rowwise_adagrad"), eval, log_interval_s, eval_interval, eval_batches, and
#                  checkpoint (the [checkpoint] interval). Strings are given bare (job_toml quotes
#                  them); a table none of whose keys is set is left out. One `key = value` a line,
#                  as the tests that edit a spec with sed expect; a test appends its own tables.
# Tests that go on after a failure to report them all define their own fail (and count).
scratch() {
  work=$(mktemp -d "/tmp/recmix-$1-XXXXXX")
  trap 'if [[ -n "${KEEP_WORK:-}" ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi' EXIT
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
job_toml() {
  # Every key in the order it is written; a [table] heads the keys that follow it.
  local layout=(name seed ranks arrival run_dir '[model]' embedding_dim bottom_mlp top_mlp
    '[optimizer]' dense sparse lr '[data]' train eval
    '[train]' batch_size steps log_interval_s eval_interval eval_batches '[checkpoint]' checkpoint)
  local -A v=([embedding_dim]=8 [bottom_mlp]="[16, 8]" [top_mlp]="[16, 1]" [train]=train.h5 [batch_size]=128)
  local arg key table=
  for arg; do
    key=${arg%%=*}
    [[ $arg == *=* && $key != \[* && " ${layout[*]} " == *" $key "* ]] || fail "job_toml: '$arg' sets no key it knows"
    v[$key]=${arg#*=}
  done
  [[ -n ${v[name]:-} && -n ${v[steps]:-} ]] || fail "job_toml: name and steps are required"
  if [[ -n ${v[lr]:-} ]]; then  # the tests' optimizer: Adagrad, row-wise for the tables
    : "${v[dense]:=adagrad}" "${v[sparse]:=rowwise_adagrad}"
  fi
  for key in "${layout[@]}"; do
    if [[ $key == \[* ]]; then table=$key; continue; fi
    [[ -n ${v[$key]+set} ]] || continue
    [[ -z $table ]] || { echo "$table"; table=; }  # a table's header before its first key given
    case $key in
      name | run_dir | dense | sparse | train | eval) echo "$key = \"${v[$key]}\"" ;;
      checkpoint) echo "interval = ${v[$key]}" ;;
      *) echo "$key = ${v[$key]}" ;;
    esac
  done
}
