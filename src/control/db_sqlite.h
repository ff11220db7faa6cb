/*
 * db_sqlite: what the files of the SQLite backend share (db_sqlite.c the
 * connection and its schema's upkeep, db_sqlite_schema.c the schema text,
 * db_sqlite_stmt.c statements and column readers, db_sqlite_tables.c the
 * backend's calls). Internal to the backend: only those files include it.
 *
 * Data model: struct dbs is db->impl for a SQLite db: the connection and
 * the path every message names. A statement's parameters are an array of
 * struct dbs_arg, bound in order as ?1..?n: text (NULL binds SQL NULL) or
 * an integer. Every helper returns AL_OK or a negative AL_E_* with db's
 * message set; none leaves a statement unfinalized.
 */
#ifndef DB_SQLITE_H
#define DB_SQLITE_H

#include "db.h"
#include "db_row.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    DBS_APP_ID = 0x41724c6b, /* "ArLk" in the file header */
    DBS_SIDE_PATH_EXTRA = 8, /* room for "-wal", "-shm" and "./" */
};

struct dbs {
    sqlite3 *h;
    char path[DB_PATH_MAX + DBS_SIDE_PATH_EXTRA];
};

struct dbs_arg {
    bool is_int;
    const char *text;
    int64_t i64;
};

static inline struct dbs_arg dbs_text(const char *v)
{
    return (struct dbs_arg){.text = v};
}

static inline struct dbs_arg dbs_int(int64_t v)
{
    return (struct dbs_arg){.is_int = true, .i64 = v};
}

#define DBS_NARGS(a) ((int)(sizeof(a) / sizeof((a)[0])))

struct dbs_migration {
    const char *name;
    const char *sql;
};

/* dbs_migrations[i] upgrades the schema from version i to i + 1
 * (db_sqlite_schema.c); DB_SCHEMA_VERSION of them. */
extern const struct dbs_migration dbs_migrations[];

/* db_sqlite.c */
int dbs_open(struct db *db, const char *where);
int dbs_close(struct db *db);

/* db_sqlite_stmt.c: statements */
struct dbs *dbs_of(struct db *db);
/* Report SQLite error rc during `what`. */
int dbs_err(struct db *db, int rc, const char *what);
int dbs_prepare(struct db *db, const char *sql, sqlite3_stmt **st);
/* Finalize st, keeping the first error (rc). */
int dbs_finish(struct db *db, sqlite3_stmt *st, int rc);
/* One step: *row true for SQLITE_ROW, false for SQLITE_DONE; anything else
 * is an error whose raw (extended) code goes to *raw when not NULL. */
int dbs_step(struct db *db, sqlite3_stmt *st, bool *row, int *raw);
/* Run every statement of sql (no parameters), discarding rows. */
int dbs_exec(struct db *db, const char *sql);
/* The one integer (text, into buf) a PRAGMA or query answers. */
int dbs_query_int(struct db *db, const char *sql, int64_t *out);
int dbs_query_text(struct db *db, const char *sql, char *buf, size_t cap);
/* Roll back an open transaction after an error, keeping its message. */
void dbs_rollback(struct db *db);
/* Run sql with its n args, expecting no row: *raw (when not NULL) gets
 * the raw (extended) result code of the step, *one (when not NULL)
 * whether exactly one row changed. */
int dbs_run(struct db *db, const char *sql, const struct dbs_arg *a, int n, int *raw, bool *one);
/* Run a prepared statement (dbs_prepare) again with new args, expecting
 * no row: many rows through one statement (its caller finishes it). The
 * text args must outlive the next run or the finish. */
int dbs_rerun(struct db *db, sqlite3_stmt *st, const struct dbs_arg *a, int n);
/* The same, AL_E_NOENT ("no <what> <key>") when no row changed. */
int dbs_change(struct db *db, const char *sql, const struct dbs_arg *a, int n, const char *what,
               const char *key, int *raw);
/* A query's first row through fn(row, out); *found: whether it had one. */
int dbs_one(struct db *db, const char *sql, const struct dbs_arg *a, int n, db_row_fn fn, void *out,
            bool *found);
/* Every row of a query through fn(row, ctx), until fn returns non-zero
 * (returned as is). */
int dbs_list(struct db *db, const char *sql, const struct dbs_arg *a, int n, db_row_fn fn,
             void *ctx);

#endif
