#ifndef PUSHHUB_CSQLITE_WAL_H
#define PUSHHUB_CSQLITE_WAL_H

#include <sqlite3.h>

/* A VFS over SQLite's default one that hands a transaction's log frames to the kernel
 * together, 64 KiB a write, instead of in two writes a frame (see CSQLiteWAL.c). */

/* The VFS's name, for sqlite3_open_v2. */
extern const char *const pushhub_wal_vfs_name;

/* Registers the VFS (not as the default); safe to call more than once. Returns SQLITE_OK or
 * SQLite's error. */
int pushhub_wal_vfs_register(void);

/* What the log of `db`'s main database (a connection opened on this VFS, in WAL mode) has
 * seen: the writes SQLite made, the writes that reached the default VFS, and of those the
 * ones that went straight through, not gathered. SQLITE_NOTFOUND when it has no log on this
 * VFS (yet). For tests. */
int pushhub_wal_vfs_log_counts(sqlite3 *db, long long *writes, long long *flushes, long long *straight);

#endif
