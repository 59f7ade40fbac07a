#pragma once
// Internal to core: SP_AVX2_AND_BASELINE compiles a function twice on x86-64, for AVX2 and for the
// baseline (SSE2), and the loader picks one (GCC target_clones). Only for code whose result does not
// depend on the vector width: the kernels that use it are written so both versions give the same bits.
//
// The load-time choice is an ifunc resolver, which runs before a sanitizer's runtime is set up and
// crashes an instrumented binary (under ThreadSanitizer every program linking sp_core, at start): the
// sanitizer builds keep the baseline version alone.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SP_SANITIZED 1
#endif
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(SP_SANITIZED)
#define SP_AVX2_AND_BASELINE __attribute__((target_clones("avx2", "default")))
#else
#define SP_AVX2_AND_BASELINE
#endif
