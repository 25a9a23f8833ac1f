#!/usr/bin/env bash
# Weights in: a PyTorch DLRM state_dict (its names and shapes, made with numpy here) exported to a
# weights file with h5py as docs/checkpoint-format.md shows, turned into a step-0 checkpoint by
# recmix init-checkpoint: the checkpoint holds exactly those weights (also when they were exported
# in float16, bfloat16 or float64), training resumes from it, and a wrong shape or an existing
# output is one clear error. A dcn model's cross layers are read in their shapes too.
# Usage: init_checkpoint.sh <recmix binary>
set -euo pipefail
recmix=$1
py=/usr/bin/python3
"$py" -c "import h5py, numpy" 2>/dev/null || { echo "init_checkpoint: python3-h5py is not installed"; exit 77; }
source "$(dirname "$0")/../lib.sh"
scratch init
cd "$work"
"$recmix" data synth -o train.h5 --rows 4k --tables 3 --table-rows 50,300,7 --dense 5 --seed 2 > /dev/null
job_toml name=imported run_dir=run steps=8 > job.toml

# The state_dict of the reference DLRM (dlrm_s_pytorch.py: emb_l.<t>.weight; bot_l and top_l are
# nn.Sequential with a Linear at every even index), exported by the documented mapping.
"$py" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(1)
state = {}
for t, rows in enumerate([50, 300, 7]):
    state[f"emb_l.{t}.weight"] = rng.uniform(-0.1, 0.1, (rows, 8)).astype(np.float32)
def mlp(prefix, sizes):
    for i in range(len(sizes) - 1):
        state[f"{prefix}.{2 * i}.weight"] = rng.normal(0, 0.1, (sizes[i + 1], sizes[i])).astype(np.float32)
        state[f"{prefix}.{2 * i}.bias"] = rng.normal(0, 0.1, sizes[i + 1]).astype(np.float32)
mlp("bot_l", [5, 16, 8])
mlp("top_l", [8 + 4 * 3 // 2, 16, 1])   # dot interaction: dim + F(F-1)/2, F = tables + 1
np.savez("state.npz", **state)
def export(state, path):
    with h5py.File(path, "w") as f:
        for name, value in state.items():
            part = name.split(".")
            if part[0] == "emb_l":
                f[f"embedding/{part[1]}"] = value
            else:
                layer = {"bot_l": "bottom", "top_l": "top"}[part[0]]
                f[f"dense/{layer}.{int(part[1]) // 2}.{part[2]}"] = value
export(state, "weights.h5")
# The same weights in half precision and in double: HDF5 converts every float type on reading.
export({k: v.astype(np.float16) for k, v in state.items()}, "weights-fp16.h5")
export({k: v.astype(np.float64) for k, v in state.items()}, "weights-fp64.h5")
bf16 = h5py.h5t.IEEE_F32LE.copy()   # bfloat16: sign bit 15, exponent bits 7-14 (bias 127), mantissa 0-6
bf16.set_fields(15, 7, 8, 0, 7); bf16.set_size(2); bf16.set_ebias(127)
def to_bf16_bits(v):  # round to nearest even
    u = v.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
with h5py.File("weights-bf16.h5", "w") as f:
    for name, value in state.items():
        part = name.split(".")
        path = f"embedding/{part[1]}" if part[0] == "emb_l" else \
            f"dense/{ {'bot_l': 'bottom', 'top_l': 'top'}[part[0]] }.{int(part[1]) // 2}.{part[2]}"
        d = f.create_dataset(path, shape=value.shape, dtype=h5py.Datatype(bf16))
        d.id.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(to_bf16_bits(value)), mtype=bf16)
np.savez("state-bf16.npz", **{k: (to_bf16_bits(v).astype(np.uint32) << 16).view(np.float32) for k, v in state.items()})
np.savez("state-fp16.npz", **{k: v.astype(np.float16).astype(np.float32) for k, v in state.items()})
np.savez("state-fp64.npz", **state)
bad = dict(state)
bad["bot_l.0.weight"] = bad["bot_l.0.weight"][:, :4]
export(bad, "bad.h5")
PY

"$recmix" init-checkpoint job.toml --weights weights.h5 > init.out 2>&1 || { cat init.out; fail "init-checkpoint failed"; }
# holds_weights <checkpoint> <npz>: the checkpoint is at step 0 and holds the npz's state_dict
# (converted to float32 by numpy: float16 and bfloat16 are exact there, float64 rounds to nearest).
holds_weights() {
  "$py" - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
state = np.load(sys.argv[2])
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["step"] == 0
    for name in state.files:
        part = name.split(".")
        if part[0] == "emb_l":
            got = f[f"embedding/{part[1]}/weights"][()]
        else:
            layer = {"bot_l": "bottom", "top_l": "top"}[part[0]]
            got = f[f"dense/{layer}.{int(part[1]) // 2}.{part[2]}"][()].reshape(state[name].shape)
        assert np.array_equal(got, state[name].astype(np.float32)), name
PY
}
ckpt=run/checkpoints/ckpt-000000000.h5
test -f "$ckpt" || fail "no checkpoint at $ckpt"
holds_weights "$ckpt" state.npz || fail "the checkpoint does not hold the given weights"
for kind in fp16 bf16 fp64; do
  "$recmix" init-checkpoint job.toml --weights "weights-$kind.h5" -o "ckpt-$kind.h5" > "init-$kind.out" 2>&1 ||
    { cat "init-$kind.out"; fail "init-checkpoint from $kind weights failed"; }
  holds_weights "ckpt-$kind.h5" "state-$kind.npz" || fail "the $kind weights were not converted exactly"
done
"$recmix" train job.toml --resume-latest > train.out 2>&1 || { cat train.out; fail "training from the imported checkpoint failed"; }
grep -q "resumed from .*ckpt-000000000.h5 at step 0" train.out || { cat train.out; fail "training did not start from it"; }

if "$recmix" init-checkpoint job.toml --weights weights.h5 > again.out 2>&1; then fail "an existing checkpoint was replaced"; fi
grep -q "exists" again.out || { cat again.out; fail "no clear error for an existing output"; }
if "$recmix" init-checkpoint job.toml --weights bad.h5 -o bad-ckpt.h5 > bad.out 2>&1; then fail "a wrong shape was accepted"; fi
grep -q "/dense/bottom.0.weight has shape \[16, 4\], the model needs \[16, 5\]" bad.out || { cat bad.out; fail "the shape error does not name the dataset and both shapes"; }
test ! -e bad-ckpt.h5 || fail "a checkpoint was written despite the error"

# A dcn model's cross layers (docs/checkpoint-format.md): V [rank, n], W [n, rank] and the bias
# [n] of each layer, n = (tables + 1) x dim = 32; a flat V is one clear error.
job_toml name=dcn run_dir=dcn-run steps=4 | sed '/^\[model\]/a interaction = "dcn"\ncross_layers = 2\ncross_rank = 3' > dcn.toml
"$py" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(2)
w = {}
for t, rows in enumerate([50, 300, 7]):
    w[f"embedding/{t}"] = rng.uniform(-0.1, 0.1, (rows, 8)).astype(np.float32)
for name, sizes in (("bottom", [5, 16, 8]), ("top", [32, 16, 1])):
    for i in range(len(sizes) - 1):
        w[f"dense/{name}.{i}.weight"] = rng.normal(0, 0.1, (sizes[i + 1], sizes[i])).astype(np.float32)
        w[f"dense/{name}.{i}.bias"] = rng.normal(0, 0.1, sizes[i + 1]).astype(np.float32)
for l in range(2):
    w[f"dense/cross.{l}.V"] = rng.normal(0, 0.1, (3, 32)).astype(np.float32)
    w[f"dense/cross.{l}.W"] = rng.normal(0, 0.1, (32, 3)).astype(np.float32)
    w[f"dense/cross.{l}.bias"] = rng.normal(0, 0.1, 32).astype(np.float32)
def write(path, w):
    with h5py.File(path, "w") as f:
        for k, v in w.items():
            f[k] = v
write("dcn-weights.h5", w)
np.savez("dcn-state.npz", **{k.replace("/", ":"): v for k, v in w.items()})
bad = dict(w)
bad["dense/cross.1.V"] = bad["dense/cross.1.V"].reshape(-1)
write("dcn-bad.h5", bad)
PY
"$recmix" init-checkpoint dcn.toml --weights dcn-weights.h5 -o dcn-ckpt.h5 > dcn-init.out 2>&1 ||
  { cat dcn-init.out; fail "init-checkpoint of a dcn model failed"; }
"$py" - <<'PY' || fail "the dcn checkpoint does not hold the given cross weights"
import h5py, numpy as np
state = np.load("dcn-state.npz")
with h5py.File("dcn-ckpt.h5", "r") as f:
    for key in state.files:
        name = key.replace(":", "/")
        if name.startswith("dense/"):
            assert np.array_equal(f[name][()].reshape(state[key].shape), state[key]), name
PY
if "$recmix" init-checkpoint dcn.toml --weights dcn-bad.h5 -o dcn-bad-ckpt.h5 > dcn-bad.out 2>&1; then
  fail "a flat cross V was accepted"
fi
grep -q "/dense/cross.1.V has shape \[96\], the model needs \[3, 32\]" dcn-bad.out ||
  { cat dcn-bad.out; fail "the cross shape error does not name the dataset and both shapes"; }
echo "init-checkpoint: ok"
