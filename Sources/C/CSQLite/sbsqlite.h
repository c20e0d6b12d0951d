/* SPDX-License-Identifier: Apache-2.0 */
/* SQLite's C API; SQLITE_TRANSIENT is a cast macro Swift cannot import. */
#ifndef SBSQLITE_H
#define SBSQLITE_H
#include <sqlite3.h>

static inline int sbsqlite_bind_text(sqlite3_stmt *s, int i, const char *text)
{
	return sqlite3_bind_text(s, i, text, -1, SQLITE_TRANSIENT);
}
static inline int sbsqlite_bind_blob(sqlite3_stmt *s, int i, const void *bytes, int n)
{
	return sqlite3_bind_blob(s, i, bytes, n, SQLITE_TRANSIENT);
}
#endif
