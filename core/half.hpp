#pragma once
// 16-bit floating-point storage: IEEE binary16 ("fp16": 1 sign, 5 exponent, 10 mantissa bits,
// subnormals) and bfloat16 ("bf16": the top 16 bits of a binary32). Values are stored as raw
// 16-bit patterns and all arithmetic stays in fp32; these functions convert, rounding to
// nearest (ties to even) or stochastically. Host/device functions, so that kernels share them.
//
// Stochastic rounding of x between its two neighbours lo < x < hi rounds up with probability
// (x - lo) / (hi - lo), so the rounded value is x in expectation. The random number is a pure
// function of a key the caller chooses (docs/math.md: (seed, table, row, step) and the column),
// so a result depends neither on the thread that computes it nor on how rows are sharded.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/random.hpp"
#include "core/host_device.hpp"

namespace recmix::half {

enum class Storage : std::uint8_t { fp32, fp16, bf16 };

RECMIX_HOST_DEVICE inline int storage_bytes(Storage s) { return s == Storage::fp32 ? 4 : 2; }

// "fp32", "fp16", "bf16" (the job spec's [precision] embedding); a name already checked: anything
// else is fp32.
inline const char* to_string(Storage s) { return s == Storage::fp32 ? "fp32" : s == Storage::fp16 ? "fp16" : "bf16"; }
inline Storage parse_storage(std::string_view name) {
  return name == "fp16" ? Storage::fp16 : name == "bf16" ? Storage::bf16 : Storage::fp32;
}

RECMIX_HOST_DEVICE inline std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

RECMIX_HOST_DEVICE inline float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// --- bf16 ---

// x as TF32 tensor cores read an fp32 value: the sign, the exponent and the first 10 significand
// bits, the other 13 cut off (toward zero). A NaN stays a NaN (cutting could make it an infinity).
RECMIX_HOST_DEVICE inline float cut_to_tf32(float x) {
  const std::uint32_t b = bits_of(x);
  if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu) != 0) return x;
  return float_of(b & 0xFFFFE000u);
}

// x rounded to TF32's 10 significand bits, to nearest with ties away from zero (PTX's
// cvt.rna.tf32.f32): how cuBLAS's TF32 GEMMs read fp32 operands on an H200, where the CPU
// backends cut (cut_to_tf32). A NaN or an infinity stays itself; a carry into the exponent is
// right, and a value within half a TF32 step of overflow becomes an infinity.
RECMIX_HOST_DEVICE inline float round_to_tf32(float x) {
  const std::uint32_t b = bits_of(x);
  if ((b & 0x7F800000u) == 0x7F800000u) return x;
  return float_of((b + 0x1000u) & 0xFFFFE000u);
}

RECMIX_HOST_DEVICE inline float bf16_to_float(std::uint16_t h) { return float_of(static_cast<std::uint32_t>(h) << 16); }

RECMIX_HOST_DEVICE inline std::uint16_t float_to_bf16(float x) {
  const std::uint32_t b = bits_of(x);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((b >> 16) | 0x0040u);  // quiet NaN
  const std::uint32_t round = 0x7fffu + ((b >> 16) & 1u);  // ties to even
  return static_cast<std::uint16_t>((b + round) >> 16);    // a carry into the exponent is right
}

// `random`: 16 uniformly random bits. Adding them below the kept bits and truncating rounds up
// with probability (dropped bits) / 2^16, which is (x - lo) / (hi - lo).
RECMIX_HOST_DEVICE inline std::uint16_t float_to_bf16_stochastic(float x, std::uint32_t random) {
  const std::uint32_t b = bits_of(x);
  if ((b & 0x7f800000u) == 0x7f800000u) return float_to_bf16(x);  // inf and NaN as they are
  const std::uint32_t up = b + (random & 0xffffu);
  // Past the largest finite value: that value (x itself is finite).
  if ((up & 0x7f800000u) == 0x7f800000u) return static_cast<std::uint16_t>((b >> 16));
  return static_cast<std::uint16_t>(up >> 16);
}

// --- fp16 ---

RECMIX_HOST_DEVICE inline float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t magnitude = h & 0x7fffu;
  if (magnitude >= 0x7c00u) {  // infinity, or NaN made quiet
    const std::uint32_t man = h & 0x3ffu;
    return float_of(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));
  }
  if (magnitude < 0x400u) {  // zero or subnormal: man x 2^-24, exact in fp32
    const float v = static_cast<float>(magnitude) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  // Normal: the exponent rebiased from 15 to 127 (+112 << 23), the mantissa widened.
  return float_of(sign | ((magnitude << 13) + 0x38000000u));
}

// The fp16 pattern of |x| rounded toward zero (x finite), and the bits dropped below it as a
// fraction of one unit of the result's last place, in 2^-32 units (for both rounding modes).
struct Fp16Split {
  std::uint16_t magnitude;  // may be 0x7c00 (inf) when |x| is past the range
  std::uint32_t below;      // (|x| - magnitude) / ulp x 2^32, truncated; sticky in the lowest bit
};

RECMIX_HOST_DEVICE inline Fp16Split fp16_split(std::uint32_t a) {
  if (a < 0x00800000u) return {0, a ? 1u : 0u};  // below 2^-126: far under fp16's smallest step
  const int e = static_cast<int>(a >> 23) - 127;  // |x| = mant x 2^(e - 23)
  if (e >= 16) return {0x7c00u, 0};              // 65536 and above: past every finite fp16
  const std::uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const int shift = e >= -14 ? 13 : -1 - e;  // bits of mant below fp16's last place (2^-24 for subnormals)
  if (shift >= 56) return {0, 1u};
  const std::uint64_t m = static_cast<std::uint64_t>(mant) << 32;
  std::uint32_t kept = 0;
  std::uint64_t rest = m;
  if (shift < 24) {
    kept = mant >> shift;
    rest = m - (static_cast<std::uint64_t>(kept) << (32 + shift));
  }
  std::uint32_t below = static_cast<std::uint32_t>(rest >> shift);
  if (rest & ((std::uint64_t(1) << shift) - 1)) below |= 1u;  // sticky
  // For normals kept carries the implicit bit, which adds one to the exponent field: e + 14 + 1
  // is the biased exponent e + 15.
  const std::uint32_t exp_field = e >= -14 ? static_cast<std::uint32_t>(e + 14) : 0u;
  return {static_cast<std::uint16_t>((exp_field << 10) + kept), below};
}

// |x| at or above 2^-14, fp16's smallest normal, and below 65536, where every fp16 is normal
// and one unit of the last place is 2^13 units of x's: the common case, in integer arithmetic
// (the exponent rebiased from 127 to 15 by subtracting 112 << 23).
RECMIX_HOST_DEVICE inline bool fp16_normal_range(std::uint32_t a) { return a - 0x38800000u < 0x0f000000u; }

RECMIX_HOST_DEVICE inline std::uint16_t float_to_fp16(float x) {
  const std::uint32_t b = bits_of(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  const std::uint32_t a = b & 0x7fffffffu;
  if (fp16_normal_range(a)) {
    const std::uint32_t m = a - 0x38000000u;
    const std::uint32_t h = (m + 0xfffu + ((m >> 13) & 1u)) >> 13;  // ties to even; a carry is right
    return static_cast<std::uint16_t>(sign | (h > 0x7c00u ? 0x7c00u : h));
  }
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // quiet NaN
  if (a == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  const Fp16Split s = fp16_split(a);
  std::uint32_t h = s.magnitude;
  if (h < 0x7c00u && (s.below > 0x80000000u || (s.below == 0x80000000u && (h & 1u)))) ++h;  // ties to even
  return static_cast<std::uint16_t>(sign | (h > 0x7c00u ? 0x7c00u : h));
}

// `random`: 32 uniformly random bits; rounds |x| up with probability (|x| - lo) / ulp. Values past
// the largest finite fp16 (65504) saturate to it rather than becoming infinite.
RECMIX_HOST_DEVICE inline std::uint16_t float_to_fp16_stochastic(float x, std::uint32_t random) {
  const std::uint32_t b = bits_of(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  const std::uint32_t a = b & 0x7fffffffu;
  if (fp16_normal_range(a)) {  // the 13 dropped bits, as a fraction of the last place: exact
    const std::uint32_t h = ((a - 0x38000000u) >> 13) + (random < (a << 19) ? 1u : 0u);
    return static_cast<std::uint16_t>(sign | (h >= 0x7c00u ? 0x7bffu : h));
  }
  if (a >= 0x7f800000u) return float_to_fp16(x);
  const Fp16Split s = fp16_split(a);
  std::uint32_t h = s.magnitude;
  if (h < 0x7c00u && random < s.below) ++h;
  return static_cast<std::uint16_t>(sign | (h >= 0x7c00u ? 0x7bffu : h));
}

// --- the rounding's random numbers ---

// The random bits of the stochastic rounding of table `table` at optimizer step `step`: its
// key, then per element (row x dim + column) 32 bits, so every element of every row gets its
// own number. random::hash(seed, stream, element) >> 32, with the key its first two rounds, so
// that a loop over many elements of one table and step computes the key once.
RECMIX_HOST_DEVICE inline std::uint64_t rounding_key(std::uint64_t seed, int table, std::int64_t step) {
  const std::uint64_t stream = random::mix64(0x524e440000000000ull ^ static_cast<std::uint64_t>(table)) ^
                               static_cast<std::uint64_t>(step);  // "RND"
  return random::mix64(random::mix64(seed) ^ stream);
}
RECMIX_HOST_DEVICE inline std::uint32_t rounding_bits_at(std::uint64_t key, std::uint64_t element) {
  return static_cast<std::uint32_t>(random::mix64(key ^ element) >> 32);
}
RECMIX_HOST_DEVICE inline std::uint32_t rounding_bits(std::uint64_t seed, int table, std::int64_t step,
                                                      std::uint64_t element) {
  return rounding_bits_at(rounding_key(seed, table, step), element);
}

}  // namespace recmix::half
