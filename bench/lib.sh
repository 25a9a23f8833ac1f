# Sourced by bench scripts, by path from the script's own folder (source "$(dirname "$0")/../lib.sh",
# before any cd), so it is found where the source tree is, the GPU machine's included:
#   kaggle_job <name> <train file> <batch> <steps> <log_interval_s>
#       prints the job spec of the Kaggle-shape model (dim 16, bottom MLP 512-256-64-16, top MLP
#       512-256-1; the tables are the dataset's, the optimizer the default) on one train file.
#       One `key = value` a line: gpu_suite.sh edits the spec's steps and train with sed.
kaggle_job() {
  cat <<TOML
name = "$1"
[model]
embedding_dim = 16
bottom_mlp = [512, 256, 64, 16]
top_mlp = [512, 256, 1]
[data]
train = "$2"
[train]
batch_size = $3
steps = $4
log_interval_s = $5
TOML
}
