# Sourced by bench/run/profile_pairs.sh and bench/run/live_vs_sim.sh: the five DLRM shapes the
# measured-pairs campaign profiles and the live-vs-simulated mix is made of, and their datasets.
# Expects bench_env.sh to have been sourced (recmix, work dir entered).
#
# Every shape trains with one thread per rank, dim 16, 26 tables, SGD, global batch 128 (large: 512):
#   small     13-64-16 / 64-1,                26 x 1e5 rows, one-hot,      1 rank
#   medium    13-512-256-64-16 / 512-256-1,   26 x 1e5 rows, one-hot,      1 rank  (the Kaggle shape)
#   large     13-512-256-64-16 / 512-256-1,   26 x 1e5 rows, one-hot,      2 ranks, global batch 512
#   multihot  13-128-64-16 / 128-64-1,        26 x 1e5 rows, 1-8 per bag,  1 rank
#   heavy     13-64-16 / 512-256-1,           26 x 3e5 rows, one-hot,      1 rank  (embedding-heavy)
# A job's type is its name up to the first '.', so jobs "small.1", "small.2" are of type small.

# The datasets (generated once in the work dir).
[[ -f multihot.h5 ]] || "$recmix" data synth -o multihot.h5 --rows 200k --tables 26 --table-rows 100000 --multi-hot \
  --pooling 1 8 --seed 3 >/dev/null
[[ -f heavy300k.h5 ]] || "$recmix" data synth -o heavy300k.h5 --rows 200k --tables 26 --table-rows 300000 --seed 2 >/dev/null

shapes=(small medium large multihot heavy)

# shape_field <shape> <field>: ranks | data | bottom | top | batch | steps (the campaign's steps,
# about 5 s alone on a 2-vCPU Xeon).
shape_field() {
  local ranks data bottom top batch steps
  case $1 in
    small)    ranks=1 data=kaggle.h5    bottom="[64, 16]"            top="[64, 1]"        batch=128 steps=7000 ;;
    medium)   ranks=1 data=kaggle.h5    bottom="[512, 256, 64, 16]"  top="[512, 256, 1]"  batch=128 steps=800 ;;
    large)    ranks=2 data=kaggle.h5    bottom="[512, 256, 64, 16]"  top="[512, 256, 1]"  batch=512 steps=450 ;;
    multihot) ranks=1 data=multihot.h5  bottom="[128, 64, 16]"       top="[128, 64, 1]"   batch=128 steps=1600 ;;
    heavy)    ranks=1 data=heavy300k.h5 bottom="[64, 16]"            top="[512, 256, 1]"  batch=128 steps=2000 ;;
    *) echo "unknown shape '$1'" >&2; return 1 ;;
  esac
  case $2 in
    ranks) echo "$ranks" ;; data) echo "$data" ;; bottom) echo "$bottom" ;; top) echo "$top" ;;
    batch) echo "$batch" ;; steps) echo "$steps" ;;
    *) echo "unknown field '$2'" >&2; return 1 ;;
  esac
}

# job_table <shape> <job name> <arrival s> [steps]: one [[job]] table of a jobs file.
job_table() {
  local steps=${4:-$(shape_field "$1" steps)}
  cat <<TOML

[[job]]
name = "$2"
ranks = $(shape_field "$1" ranks)
arrival = $3
model = { embedding_dim = 16, bottom_mlp = $(shape_field "$1" bottom), top_mlp = $(shape_field "$1" top) }
data = { train = "$(shape_field "$1" data)" }
train = { batch_size = $(shape_field "$1" batch), steps = $steps, log_interval_s = 100 }
TOML
}
