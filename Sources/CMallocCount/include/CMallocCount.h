#ifndef PUSHHUB_MALLOC_COUNT_H
#define PUSHHUB_MALLOC_COUNT_H

/// Starts counting malloc, calloc and realloc calls in this process, from zero.
void pushhub_allocations_start(void);

/// Stops counting; the calls since the start.
long pushhub_allocations_stop(void);

#endif
