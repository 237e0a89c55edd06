#ifndef PUSHHUB_CSPAWN_SHIM_H
#define PUSHHUB_CSPAWN_SHIM_H

#include <spawn.h>

/* glibc declares these only under _GNU_SOURCE, which Swift's Glibc module is not built
 * with; glibc 2.34 and later have both. */
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);
extern int pipe2(int fds[2], int flags);

#endif
