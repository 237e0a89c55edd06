/* A VFS over SQLite's default one that gathers a transaction's writes to its log.
 *
 * SQLite writes each frame of the write-ahead log as two writes, its 24-byte header and then
 * its page, so a commit of N pages was 2N `pwrite` calls, each taking the kernel's per-call
 * and per-page path (a tenth of the ingress's CPU while it stored registrations). Here a
 * write that continues where the one before it ended is gathered, and what was gathered
 * reaches the kernel as one write:
 *   - once the commit frame is complete: the frame whose header holds the database's size
 *     after the commit (nonzero only there, by the WAL file format), and which SQLite writes
 *     last before it publishes the commit in the wal-index, where other connections and
 *     processes find it;
 *   - before anything else is done with the file: a read, sync, truncate, size or file
 *     control;
 *   - when a write lands anywhere else (SQLite rewriting a frame or the checksums of its own
 *     transaction, or starting the log again from its beginning): that write then goes
 *     straight through, after what was gathered;
 *   - past GATHER_LIMIT bytes.
 * (In pieces of at most WRITE_LIMIT bytes: sixteen 4 KiB frames a call, not 32.)
 * So every frame of a commit is in the kernel before the commit is published, as without the
 * VFS, and a process killed after a commit returned loses nothing. Frames gathered of a
 * transaction that never commits are dropped when the write lock is let go, or the log
 * closes: written later, they could land on frames another connection committed meanwhile.
 * A failed write of what was gathered fails every later call on the log until then, so the
 * transaction cannot commit without those frames. Files other than logs pass straight
 * through. (In SQLite's exclusive locking mode, which PushHub does not use, no lock is let go
 * through the VFS and the dropping happens at close only.)
 *
 * A file is used by one connection, and a connection by one thread at a time (SQLite's
 * NOMUTEX), so the gathered bytes need no lock. */

#include "CSQLiteWAL.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_HEADER 24
#define GATHER_LIMIT (1 << 20)
/* The default VFS writes at most 128 KiB - 1 bytes a call (os_unix.c's seekAndWriteFd masks
 * the length with 0x1ffff), so what was gathered goes in pieces of 64 KiB. */
#define WRITE_LIMIT (64 * 1024)

const char *const pushhub_wal_vfs_name = "pushhub-wal";

static sqlite3_vfs gatheringVfs;
static sqlite3_vfs *baseVfs;

typedef struct GatheringFile {
    sqlite3_file base;
    /* The default VFS's file, in the same allocation, just after this struct. */
    sqlite3_file *real;
    /* Bytes gathered, to be written at `start`. */
    unsigned char *bytes;
    int length;
    int capacity;
    sqlite3_int64 start;
    /* Where the last write ended: a write here continues it. */
    sqlite3_int64 next;
    /* The last write was the header of a commit frame. */
    int commitHeader;
    /* Writes SQLite made, writes that reached the default VFS, and of those the ones that
     * went straight through. */
    long long writes, flushes, straight;
    /* A gathered log's database file (NULL for any other file), and a database file's log
     * while it is open. */
    struct GatheringFile *database;
    struct GatheringFile *log;
    /* A write of what was gathered failed: every later call on the log fails too, until the
     * write lock is let go, so the transaction cannot commit without those frames. */
    int failed;
} GatheringFile;

/* Forgets what was gathered: frames of a transaction that did not commit. */
static void discard(GatheringFile *log) {
    log->length = 0;
    log->next = -1;
    log->commitHeader = 0;
    log->failed = 0;
}

static int flush(GatheringFile *file) {
    if (file->failed) return SQLITE_IOERR_WRITE;
    int length = file->length;
    file->length = 0;
    for (int done = 0; done < length; done += WRITE_LIMIT) {
        int amount = length - done < WRITE_LIMIT ? length - done : WRITE_LIMIT;
        file->flushes++;
        int rc = file->real->pMethods->xWrite(file->real, file->bytes + done, amount, file->start + done);
        if (rc != SQLITE_OK) {
            file->failed = 1;
            return rc;
        }
    }
    return SQLITE_OK;
}

static int gather(GatheringFile *file, const void *data, int amount, sqlite3_int64 offset) {
    if (file->length + amount > file->capacity) {
        int capacity = file->capacity ? file->capacity : 64 * 1024;
        while (capacity < file->length + amount) capacity *= 2;
        unsigned char *bytes = realloc(file->bytes, (size_t)capacity);
        if (bytes == NULL) {
            int rc = flush(file);
            if (rc != SQLITE_OK) return rc;
            file->flushes++;
            return file->real->pMethods->xWrite(file->real, data, amount, offset);
        }
        file->bytes = bytes;
        file->capacity = capacity;
    }
    if (file->length == 0) file->start = offset;
    memcpy(file->bytes + file->length, data, (size_t)amount);
    file->length += amount;
    return SQLITE_OK;
}

static int gatheringWrite(sqlite3_file *handle, const void *data, int amount, sqlite3_int64 offset) {
    GatheringFile *file = (GatheringFile *)handle;
    if (file->database == NULL) return file->real->pMethods->xWrite(file->real, data, amount, offset);
    file->writes++;
    if (file->failed) return SQLITE_IOERR_WRITE;
    const unsigned char *bytes = data;
    /* A commit frame's page follows its header, whichever way the header went. */
    int completesCommit = file->commitHeader && amount != FRAME_HEADER;
    file->commitHeader = amount == FRAME_HEADER && (bytes[4] | bytes[5] | bytes[6] | bytes[7]) != 0;
    int rc;
    if (offset == file->next) {
        rc = gather(file, data, amount, offset);
        if (rc == SQLITE_OK && (completesCommit || file->length >= GATHER_LIMIT)) rc = flush(file);
    } else {
        rc = flush(file);
        if (rc == SQLITE_OK) {
            file->flushes++;
            file->straight++;
            rc = file->real->pMethods->xWrite(file->real, data, amount, offset);
        }
    }
    file->next = offset + amount;
    return rc;
}

static int gatheringClose(sqlite3_file *handle) {
    GatheringFile *file = (GatheringFile *)handle;
    /* What is still gathered as the log closes, or its database (which SQLite closes after
     * it), was never committed: dropped. */
    if (file->database) file->database->log = NULL;
    if (file->log) {
        discard(file->log);
        file->log->database = NULL;
    }
    int closed = file->real->pMethods->xClose(file->real);
    free(file->bytes);
    file->bytes = NULL;
    file->capacity = 0;
    file->length = 0;
    return closed;
}

/* Everything else is the default VFS's, after what was gathered. */

static int gatheringRead(sqlite3_file *handle, void *data, int amount, sqlite3_int64 offset) {
    GatheringFile *file = (GatheringFile *)handle;
    int rc = flush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xRead(file->real, data, amount, offset);
}

static int gatheringTruncate(sqlite3_file *handle, sqlite3_int64 size) {
    GatheringFile *file = (GatheringFile *)handle;
    int rc = flush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xTruncate(file->real, size);
}

static int gatheringSync(sqlite3_file *handle, int flags) {
    GatheringFile *file = (GatheringFile *)handle;
    int rc = flush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xSync(file->real, flags);
}

static int gatheringFileSize(sqlite3_file *handle, sqlite3_int64 *size) {
    GatheringFile *file = (GatheringFile *)handle;
    int rc = flush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xFileSize(file->real, size);
}

/* Locks are taken on database files only, which gather nothing: straight through. */
static int gatheringLock(sqlite3_file *handle, int level) {
    GatheringFile *file = (GatheringFile *)handle;
    return file->real->pMethods->xLock(file->real, level);
}

static int gatheringUnlock(sqlite3_file *handle, int level) {
    GatheringFile *file = (GatheringFile *)handle;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int gatheringCheckReservedLock(sqlite3_file *handle, int *reserved) {
    GatheringFile *file = (GatheringFile *)handle;
    return file->real->pMethods->xCheckReservedLock(file->real, reserved);
}

static int gatheringFileControl(sqlite3_file *handle, int op, void *argument) {
    GatheringFile *file = (GatheringFile *)handle;
    int rc = flush(file);
    return rc != SQLITE_OK ? rc : file->real->pMethods->xFileControl(file->real, op, argument);
}

static int gatheringSectorSize(sqlite3_file *handle) {
    GatheringFile *file = (GatheringFile *)handle;
    return file->real->pMethods->xSectorSize(file->real);
}

static int gatheringDeviceCharacteristics(sqlite3_file *handle) {
    GatheringFile *file = (GatheringFile *)handle;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

static int gatheringShmMap(sqlite3_file *handle, int region, int size, int extend, void volatile **memory) {
    GatheringFile *file = (GatheringFile *)handle;
    const sqlite3_io_methods *methods = file->real->pMethods;
    if (methods->iVersion < 2 || methods->xShmMap == NULL) return SQLITE_IOERR_SHMMAP;
    return methods->xShmMap(file->real, region, size, extend, memory);
}

static int gatheringShmLock(sqlite3_file *handle, int offset, int count, int flags) {
    GatheringFile *file = (GatheringFile *)handle;
    const sqlite3_io_methods *methods = file->real->pMethods;
    if (methods->iVersion < 2 || methods->xShmLock == NULL) return SQLITE_IOERR_SHMLOCK;
    /* The database's write lock (the wal-index's lock 0) let go: what its log still holds
     * gathered was never committed (a commit's frames are written before it is published),
     * such as frames spilled by a transaction that rolled back. It is dropped before another
     * connection or process may write its own frames where they would have gone. */
    if (file->log != NULL && offset == 0 && flags == (SQLITE_SHM_UNLOCK | SQLITE_SHM_EXCLUSIVE)) discard(file->log);
    return methods->xShmLock(file->real, offset, count, flags);
}

static void gatheringShmBarrier(sqlite3_file *handle) {
    GatheringFile *file = (GatheringFile *)handle;
    const sqlite3_io_methods *methods = file->real->pMethods;
    if (methods->iVersion >= 2 && methods->xShmBarrier != NULL) methods->xShmBarrier(file->real);
}

static int gatheringShmUnmap(sqlite3_file *handle, int delete) {
    GatheringFile *file = (GatheringFile *)handle;
    const sqlite3_io_methods *methods = file->real->pMethods;
    if (methods->iVersion < 2 || methods->xShmUnmap == NULL) return SQLITE_OK;
    return methods->xShmUnmap(file->real, delete);
}

static int gatheringFetch(sqlite3_file *handle, sqlite3_int64 offset, int amount, void **page) {
    GatheringFile *file = (GatheringFile *)handle;
    const sqlite3_io_methods *methods = file->real->pMethods;
    *page = NULL;
    if (methods->iVersion < 3 || methods->xFetch == NULL) return SQLITE_OK;
    return methods->xFetch(file->real, offset, amount, page);
}

static int gatheringUnfetch(sqlite3_file *handle, sqlite3_int64 offset, void *page) {
    GatheringFile *file = (GatheringFile *)handle;
    const sqlite3_io_methods *methods = file->real->pMethods;
    if (methods->iVersion < 3 || methods->xUnfetch == NULL) return SQLITE_OK;
    return methods->xUnfetch(file->real, offset, page);
}

static const sqlite3_io_methods gatheringMethods = {
    3,
    gatheringClose,
    gatheringRead,
    gatheringWrite,
    gatheringTruncate,
    gatheringSync,
    gatheringFileSize,
    gatheringLock,
    gatheringUnlock,
    gatheringCheckReservedLock,
    gatheringFileControl,
    gatheringSectorSize,
    gatheringDeviceCharacteristics,
    gatheringShmMap,
    gatheringShmLock,
    gatheringShmBarrier,
    gatheringShmUnmap,
    gatheringFetch,
    gatheringUnfetch,
};

static int gatheringOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *handle, int flags, int *outFlags) {
    (void)vfs;
    GatheringFile *file = (GatheringFile *)handle;
    memset(file, 0, sizeof(GatheringFile));
    file->real = (sqlite3_file *)(file + 1);
    int rc = baseVfs->xOpen(baseVfs, name, file->real, flags, outFlags);
    if (rc != SQLITE_OK) {
        /* SQLite calls no method of a file whose open failed; the default VFS closed its own. */
        file->base.pMethods = NULL;
        return rc;
    }
    file->base.pMethods = &gatheringMethods;
    if (flags & SQLITE_OPEN_WAL) {
        /* Its database file, opened on this VFS, drops what the log gathered when the write
         * lock is let go. Logs are gathered only where SQLite never pads a commit to a sector
         * (power-safe overwrite, the default VFS's default): a padded frame may be split
         * across writes that the commit detection would not follow. */
        sqlite3_file *database = sqlite3_database_file_object(name);
        if (database != NULL && database->pMethods == &gatheringMethods) {
            GatheringFile *owner = (GatheringFile *)database;
            const sqlite3_io_methods *methods = owner->real->pMethods;
            if (methods->xDeviceCharacteristics(owner->real) & SQLITE_IOCAP_POWERSAFE_OVERWRITE) {
                file->database = owner;
                owner->log = file;
            }
        }
    }
    return SQLITE_OK;
}

static pthread_once_t registration = PTHREAD_ONCE_INIT;
static int registered = SQLITE_ERROR;

static void registerOnce(void) {
    baseVfs = sqlite3_vfs_find(NULL);
    if (baseVfs == NULL) return;
    /* The default VFS's other methods as they are: they take the VFS only for its
     * mxPathname and pAppData, copied here. */
    gatheringVfs = *baseVfs;
    gatheringVfs.szOsFile = (int)sizeof(GatheringFile) + baseVfs->szOsFile;
    gatheringVfs.pNext = NULL;
    gatheringVfs.zName = pushhub_wal_vfs_name;
    gatheringVfs.xOpen = gatheringOpen;
    registered = sqlite3_vfs_register(&gatheringVfs, 0);
}

int pushhub_wal_vfs_register(void) {
    pthread_once(&registration, registerOnce);
    return registered;
}

int pushhub_wal_vfs_log_counts(sqlite3 *db, long long *writes, long long *flushes, long long *straight) {
    sqlite3_file *log = NULL;
    int rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &log);
    if (rc != SQLITE_OK) return rc;
    if (log == NULL || log->pMethods != &gatheringMethods) return SQLITE_NOTFOUND;
    GatheringFile *file = (GatheringFile *)log;
    if (file->database == NULL) return SQLITE_NOTFOUND;
    *writes = file->writes;
    *flushes = file->flushes;
    *straight = file->straight;
    return SQLITE_OK;
}
