#pragma once
// RECMIX_CLONES_AVX2: compile a function twice, for AVX2 and for the baseline, and pick one at
// load time (GCC/clang function multi-versioning, an ifunc). Plain code under ThreadSanitizer:
// the ifunc resolver runs while the dynamic loader relocates the program, before TSan's runtime
// is set up, and its instrumented code crashes there.
#if defined(__SANITIZE_THREAD__)
#define RECMIX_CLONES_AVX2
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RECMIX_CLONES_AVX2
#endif
#endif
#ifndef RECMIX_CLONES_AVX2
#define RECMIX_CLONES_AVX2 __attribute__((target_clones("avx2", "default")))
#endif
