#ifndef PUSHHUB_CSQLITE_SHIM_H
#define PUSHHUB_CSQLITE_SHIM_H

#include <sqlite3.h>

/* SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift cannot import. */
static inline int pushhub_sqlite3_bind_text(sqlite3_stmt *statement, int index, const char *text, int length) {
    return sqlite3_bind_text(statement, index, text, length, SQLITE_TRANSIENT);
}

/* SQLITE_STATIC, also a macro: SQLite uses the text where it is, which must stay unchanged until
 * the parameter is bound again (sqlite3_clear_bindings binds NULL) or the statement is
 * finalized; sqlite3_reset keeps the bindings. */
static inline int pushhub_sqlite3_bind_static_text(sqlite3_stmt *statement, int index, const char *text, int length) {
    return sqlite3_bind_text(statement, index, text, length, SQLITE_STATIC);
}

static inline int pushhub_sqlite3_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(statement, index, bytes, length, SQLITE_TRANSIENT);
}

/* sqlite3_config is variadic, which Swift cannot call. Turns SQLite's memory statistics off:
 * with them on, every allocation SQLite makes takes a process-wide mutex. Only before SQLite
 * is initialized (SQLITE_MISUSE after). */
static inline int pushhub_sqlite3_config_memstatus(int on) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on);
}

#endif
