// Counts heap allocations for `pushhub-allocations` (the allocation regression guard). This
// file defines malloc, calloc and realloc for the one executable that links it: each forwards
// to glibc's own (__libc_*), counting while counting is on. No other product links it.
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "CMallocCount.h"

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);

static _Atomic long counted = 0;
static _Atomic bool counting = false;

static inline void count(void) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add_explicit(&counted, 1, memory_order_relaxed);
}

void *malloc(size_t size) {
    count();
    return __libc_malloc(size);
}

void *calloc(size_t count_, size_t size) {
    count();
    return __libc_calloc(count_, size);
}

void *realloc(void *pointer, size_t size) {
    count();
    return __libc_realloc(pointer, size);
}

void pushhub_allocations_start(void) {
    atomic_store(&counted, 0);
    atomic_store(&counting, true);
}

long pushhub_allocations_stop(void) {
    atomic_store(&counting, false);
    return atomic_load(&counted);
}
