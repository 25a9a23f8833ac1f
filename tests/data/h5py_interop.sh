#!/usr/bin/env bash
# Files written by h5py in its default way (strings as variable-length UTF-8 attributes, numpy
# integer and float arrays) are read by recmix: a dataset made with h5py trains and evaluates, and
# a checkpoint rewritten by h5py loads. A float where an integer is documented is one clear error.
# Usage: h5py_interop.sh <recmix binary>
set -euo pipefail
recmix=$1
py=/usr/bin/python3
"$py" -c "import h5py, numpy" 2>/dev/null || { echo "h5py_interop: python3-h5py is not installed"; exit 77; }
source "$(dirname "$0")/../lib.sh"
scratch h5py

"$py" - "$work" <<'PY'
import sys, h5py, numpy as np
work = sys.argv[1]
rng = np.random.default_rng(3)
def dataset(path, n, table_rows, float_rows=False):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "recmix-dataset"          # variable-length UTF-8, h5py's default
        f.attrs["format_version"] = 1
        f.attrs["num_dense"] = np.int32(4)            # a 32-bit integer
        f.attrs["num_tables"] = len(table_rows)
        f.attrs["table_rows"] = np.array(table_rows, dtype=np.float64 if float_rows else np.uint32)
        f.attrs["multi_hot"] = 0
        f.attrs["rows"] = n
        dense = rng.standard_normal((n, 4)).astype(np.float32)
        sparse = np.stack([rng.integers(0, r, n) for r in table_rows], axis=1).astype(np.int32)
        labels = ((dense[:, 0] + (sparse[:, 0] % 2)) > 0.5).astype(np.float32)
        f["dense"] = dense
        f["labels"] = labels
        f["sparse"] = sparse
dataset(f"{work}/train.h5", 4096, [50, 300, 7])
dataset(f"{work}/eval.h5", 1024, [50, 300, 7])
dataset(f"{work}/float_rows.h5", 64, [50, 300, 7], float_rows=True)
PY

"$recmix" data inspect "$work/train.h5" > "$work/inspect.out" 2>&1 || { cat "$work/inspect.out"; fail "inspect rejects an h5py dataset"; }
job_toml name=h5py run_dir=run eval=eval.h5 batch_size=256 steps=16 > "$work/job.toml"
"$recmix" train "$work/job.toml" > "$work/train.out" 2>&1 || { cat "$work/train.out"; fail "training on an h5py dataset failed"; }
ckpt=$(ls "$work"/run/checkpoints/ckpt-*.h5 | tail -1)

# The checkpoint rewritten by h5py: every attribute set again the obvious way.
"$py" - "$ckpt" "$work/rewritten.h5" <<'PY'
import sys, h5py, numpy as np
src, dst = sys.argv[1], sys.argv[2]
with h5py.File(src, "r") as a, h5py.File(dst, "w") as b:
    def attrs(x, y):
        for k, v in x.attrs.items():
            if isinstance(v, bytes): v = v.decode()
            if isinstance(v, np.ndarray) and v.dtype.kind == "i": v = v.astype(np.int32) if v.max(initial=0) < 2**31 else v
            y.attrs[k] = v
    attrs(a, b)
    def copy(name, obj):
        if isinstance(obj, h5py.Dataset):
            b[name] = obj[()]
            attrs(obj, b[name])
        else:
            attrs(obj, b.require_group(name))
    a.visititems(copy)
PY
"$recmix" eval "$work/rewritten.h5" "$work/eval.h5" > "$work/eval.out" 2>&1 || { cat "$work/eval.out"; fail "eval of an h5py-written checkpoint failed"; }
"$recmix" eval "$ckpt" "$work/eval.h5" > "$work/eval0.out" 2>&1 || fail "eval of the original checkpoint failed"
grep -o "AUC [0-9.]*" "$work/eval.out" > "$work/a"; grep -o "AUC [0-9.]*" "$work/eval0.out" > "$work/b"
cmp -s "$work/a" "$work/b" || { cat "$work/eval.out" "$work/eval0.out"; fail "the rewritten checkpoint evaluates differently"; }

# Float table sizes: one clear error naming the attribute.
if "$recmix" data inspect "$work/float_rows.h5" > "$work/bad.out" 2>&1; then fail "float table_rows accepted"; fi
grep -q "table_rows" "$work/bad.out" || { cat "$work/bad.out"; fail "the error does not name table_rows"; }
echo "h5py interop: ok"
