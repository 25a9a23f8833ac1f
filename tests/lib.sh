# Shared by the shell tests (source it after `set -euo pipefail`):
#   scratch <tag>  makes $work, a folder /tmp/recmix-<tag>-XXXXXX removed when the test exits,
#                  or kept and named when KEEP_WORK is set;
#   fail <why>     prints "FAIL: <why>" on stderr and ends the test with status 1.
# Tests that go on after a failure to report them all define their own fail (and count).
scratch() {
  work=$(mktemp -d "/tmp/recmix-$1-XXXXXX")
  trap 'if [[ -n "${KEEP_WORK:-}" ]]; then echo "kept $work" >&2; else rm -rf "$work"; fi' EXIT
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
