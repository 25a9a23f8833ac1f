# Sourced by the bench/run scripts with their arguments: $1 the recmix binary, $2 the work dir
# (default /tmp/recmix-bench-colocation, shared by both scripts). Sets recmix, work, src, mpirun
# and now(), enters the work dir, and generates the Kaggle-shaped dataset there once.
recmix=$(realpath "$1")
work=${2:-/tmp/recmix-bench-colocation}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mpirun=("$src/launch/recmix-mpirun")
mkdir -p "$work"
cd "$work"
now() { date +%s.%N; }
# 26 tables of 100k rows.
[[ -f kaggle.h5 ]] || "$recmix" data synth -o kaggle.h5 --rows 400k --tables 26 --table-rows 100000 --seed 1 >/dev/null
