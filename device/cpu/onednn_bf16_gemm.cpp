// oneDNN matmul for the CPU backend's bf16 GEMM (onednn_bf16_gemm.hpp), through oneDNN's C API.
#include "device/cpu/onednn_bf16_gemm.hpp"

#include <oneapi/dnnl/dnnl.h>

#include <bit>
#include <compare>
#include <fmt/format.h>
#include <map>

#include "core/error.hpp"

namespace recmix::device::cpu {
namespace {

void check(dnnl_status_t status, const char* call) {
  if (status != dnnl_success)
    throw DeviceError(fmt::format("oneDNN bf16 GEMM: {} failed with status {}", call, static_cast<int>(status)));
}

// Everything a primitive is built for. alpha goes in as the output scale and beta as the scale of
// a sum post-op; oneDNN 2.6 fixes the sum's scale when the primitive is built, so both are part of
// the key (bit patterns, which order totally). The thread count is too: a primitive may divide its
// work among the threads there are when it is built.
struct Key {
  bool trans_a, trans_b;
  int m, n, k, lda, ldb, ldc;
  std::uint32_t alpha_bits, beta_bits;
  int threads;
  auto operator<=>(const Key&) const = default;
};

// A built primitive and the memory objects its arguments are bound through (their data handles
// are set on each call). primitive is null where oneDNN refused the call (dnnl_unimplemented).
struct Entry {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_t src = nullptr, weights = nullptr, dst = nullptr;
  Entry() = default;
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  ~Entry() {
    if (primitive) dnnl_primitive_destroy(primitive);
    if (src) dnnl_memory_destroy(src);
    if (weights) dnnl_memory_destroy(weights);
    if (dst) dnnl_memory_destroy(dst);
  }
};

// Primitives kept at most; past it the cache starts again (a training job uses a few shapes per
// layer: forward, two gradients, and a last, shorter batch).
constexpr std::size_t kMaxEntries = 256;

// A row-major matrix of `rows` x `cols` as oneDNN sees it: op(X) with its strides, X stored with
// row stride ld (transposed: X is cols x rows as stored, so op(X)'s rows are X's columns).
dnnl_memory_desc_t matrix_desc(int rows, int cols, int ld, bool transposed, dnnl_data_type_t type) {
  dnnl_memory_desc_t desc;
  const dnnl_dims_t dims = {rows, cols};
  const dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
  check(dnnl_memory_desc_init_by_strides(&desc, 2, dims, type, strides), "dnnl_memory_desc_init_by_strides");
  return desc;
}

}  // namespace

struct OneDnnBf16Gemm::State {
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::map<Key, Entry> entries;

  State() {
    check(dnnl_engine_create(&engine, dnnl_cpu, 0), "dnnl_engine_create");
    const dnnl_status_t status = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    if (status != dnnl_success) {
      dnnl_engine_destroy(engine);
      check(status, "dnnl_stream_create");
    }
  }
  ~State() {
    entries.clear();  // their primitives and memory objects before the engine
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
  }

  // Builds the primitive for `key`, or leaves entry.primitive null where oneDNN has none.
  void build(const Key& key, Entry& entry) {
    const dnnl_memory_desc_t src = matrix_desc(key.m, key.k, key.lda, key.trans_a, dnnl_bf16);
    const dnnl_memory_desc_t weights = matrix_desc(key.k, key.n, key.ldb, key.trans_b, dnnl_bf16);
    const dnnl_memory_desc_t dst = matrix_desc(key.m, key.n, key.ldc, false, dnnl_f32);
    dnnl_matmul_desc_t matmul;
    check(dnnl_matmul_desc_init(&matmul, &src, &weights, nullptr, &dst), "dnnl_matmul_desc_init");

    dnnl_primitive_attr_t attr = nullptr;
    check(dnnl_primitive_attr_create(&attr), "dnnl_primitive_attr_create");
    const float alpha = std::bit_cast<float>(key.alpha_bits), beta = std::bit_cast<float>(key.beta_bits);
    dnnl_primitive_desc_t pd = nullptr;
    dnnl_status_t status = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha);
    if (status == dnnl_success && beta != 0.f) {  // dst = alpha (A B) + beta dst
      dnnl_post_ops_t post_ops = nullptr;
      status = dnnl_post_ops_create(&post_ops);
      if (status == dnnl_success) status = dnnl_post_ops_append_sum(post_ops, beta);
      if (status == dnnl_success) status = dnnl_primitive_attr_set_post_ops(attr, post_ops);
      if (post_ops) dnnl_post_ops_destroy(post_ops);
    }
    if (status == dnnl_success) status = dnnl_primitive_desc_create(&pd, &matmul, attr, engine, nullptr);
    dnnl_primitive_attr_destroy(attr);
    if (status == dnnl_unimplemented) return;
    check(status, "building the matmul primitive");
    status = dnnl_primitive_create(&entry.primitive, pd);
    dnnl_primitive_desc_destroy(pd);
    check(status, "dnnl_primitive_create");
    check(dnnl_memory_create(&entry.src, &src, engine, DNNL_MEMORY_NONE), "dnnl_memory_create");
    check(dnnl_memory_create(&entry.weights, &weights, engine, DNNL_MEMORY_NONE), "dnnl_memory_create");
    check(dnnl_memory_create(&entry.dst, &dst, engine, DNNL_MEMORY_NONE), "dnnl_memory_create");
  }
};

OneDnnBf16Gemm::OneDnnBf16Gemm() : state_(std::make_unique<State>()) {}
OneDnnBf16Gemm::~OneDnnBf16Gemm() = default;

bool OneDnnBf16Gemm::run(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                         int lda, const std::uint16_t* b, int ldb, float beta, float* c, int ldc, int threads) {
  const Key key{trans_a, trans_b, m, n, k, lda, ldb, ldc, std::bit_cast<std::uint32_t>(alpha),
                std::bit_cast<std::uint32_t>(beta), threads};
  auto found = state_->entries.find(key);
  if (found == state_->entries.end()) {
    if (state_->entries.size() >= kMaxEntries) state_->entries.clear();
    found = state_->entries.try_emplace(key).first;
    try {
      state_->build(key, found->second);
    } catch (...) {
      state_->entries.erase(found);
      throw;
    }
  }
  Entry& entry = found->second;
  if (!entry.primitive) return false;
  // oneDNN only reads the source and weights; its API takes every handle as void*.
  check(dnnl_memory_set_data_handle(entry.src, const_cast<std::uint16_t*>(a)), "dnnl_memory_set_data_handle");
  check(dnnl_memory_set_data_handle(entry.weights, const_cast<std::uint16_t*>(b)), "dnnl_memory_set_data_handle");
  check(dnnl_memory_set_data_handle(entry.dst, c), "dnnl_memory_set_data_handle");
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, entry.src}, {DNNL_ARG_WEIGHTS, entry.weights}, {DNNL_ARG_DST, entry.dst}};
  const dnnl_status_t status = dnnl_primitive_execute(entry.primitive, state_->stream, 3, args);
  if (status != dnnl_success)
    throw DeviceError(fmt::format("oneDNN bf16 GEMM ({} x {} x {}) failed with status {}", m, n, k,
                                  static_cast<int>(status)));
  check(dnnl_stream_wait(state_->stream), "dnnl_stream_wait");
  return true;
}

bool OneDnnBf16Gemm::native() {
  // The ISA bits of avx512_core_bf16 are contained in those of every ISA with bf16 instructions.
  const unsigned isa = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const unsigned bf16 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core_bf16);
  return (isa & bf16) == bf16;
}

}  // namespace recmix::device::cpu
