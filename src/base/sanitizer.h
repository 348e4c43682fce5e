/*
 * sanitizer.h: which sanitizer instruments this translation unit.
 *
 * DLCP_UNDER_ASAN, DLCP_UNDER_TSAN and DLCP_UNDER_MSAN are defined (to 1)
 * when AddressSanitizer, ThreadSanitizer or MemorySanitizer is on, for GCC
 * (__SANITIZE_ADDRESS__, __SANITIZE_THREAD__) and clang (__has_feature)
 * alike, so that code which must behave differently under one (a soak's
 * memory verdict, a test's size, an ifunc resolver) asks one place.
 */
#ifndef DLCP_BASE_SANITIZER_H
#define DLCP_BASE_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define DLCP_UNDER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define DLCP_UNDER_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(DLCP_UNDER_ASAN)
#define DLCP_UNDER_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(DLCP_UNDER_TSAN)
#define DLCP_UNDER_TSAN 1
#endif
#if __has_feature(memory_sanitizer)
#define DLCP_UNDER_MSAN 1
#endif
#endif

#endif /* DLCP_BASE_SANITIZER_H */
