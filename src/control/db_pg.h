/*
 * db_pg: what the files of the PostgreSQL backend share (db_pg.c the
 * connection's opening, its URL's secrets and the schema's upkeep,
 * db_pg_schema.c the schema text, db_pg_exec.c messages, statements and
 * column readers, db_pg_tables.c the backend's calls). Internal to the
 * backend: only those files include it.
 *
 * Data model: struct dbp is db->impl for a PostgreSQL db: the connection,
 * the label every message names the database by, and the spellings of the
 * URL's password that every message masks. Parameters are text (NULL: SQL
 * NULL); integers go in through dbp_i64_text. Every helper returns AL_OK
 * or a negative AL_E_* with db's message set (masked).
 */
#ifndef DB_PG_H
#define DB_PG_H

#include "db.h"
#include "db_row.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    DBP_SECRETS = 3,         /* spellings of the URL's password */
    DBP_LABEL_MAX = 96,      /* "PostgreSQL database NAME" */
    DBP_REASON_MAX = 320,    /* a libpq reason on one line */
    DBP_STATE_LEN = 5,       /* an SQLSTATE */
    DBP_CONSTRAINT_MAX = 64, /* a constraint's name */
    DBP_INT_TEXT = 24,       /* an int64 in decimal, with NUL */
};

struct dbp {
    PGconn *conn;
    char label[DBP_LABEL_MAX]; /* names the database in messages */
    char *secret[DBP_SECRETS]; /* masked in every message; cleansed */
    bool in_tx;                /* between BEGIN and COMMIT/ROLLBACK */
    int64_t last_try;          /* last reconnect attempt (Unix ms), 0: none */
    char lost[DBP_REASON_MAX]; /* why the connection went, for later calls */
    unsigned cursors;          /* lists run so far: names their cursors */
};

/* What a failed statement said, for callers that map constraints. */
struct dbp_res {
    PGresult *res; /* on success; the caller PQclear's it */
    char state[DBP_STATE_LEN + 1];
    char constraint[DBP_CONSTRAINT_MAX];
};

struct dbp_migration {
    const char *name;
    const char *const *sql; /* statements, NULL-terminated */
};

/* db_pg_schema.c: dbp_migrations[i] upgrades the schema from version i to
 * i + 1 (DB_SCHEMA_VERSION of them); dbp_version_table is where the
 * version lives. */
extern const struct dbp_migration dbp_migrations[];
extern const char dbp_version_table[];

/* db_pg.c */
int dbp_open(struct db *db, const char *url);
int dbp_close(struct db *db);

/* db_pg_exec.c: messages */
struct dbp *dbp_of(struct db *db);
/* msg with every secret replaced by "***", in place (cap bytes). */
void dbp_mask(const struct dbp *p, char *msg, size_t cap);
/* As db_fail, then masked. */
__attribute__((format(printf, 3, 4))) int dbp_fail(struct db *db, int code, const char *fmt, ...);
/* libpq's multi-line text on one line (control characters dropped). */
void dbp_one_line(const char *in, char *out, size_t cap);
/* The connection's own error text, on one line. */
void dbp_conn_reason(const struct dbp *p, char *out, size_t cap);
bool dbp_state_is(const char *state, const char *want);
/* Whether an SQLSTATE is of class cls (its first two characters). */
bool dbp_class_is(const char *state, const char *cls);

/* db_pg_exec.c: the connection and statements */
/* Receives notices and warnings, which are not ours to print. */
void dbp_notice(void *arg, const PGresult *res);
/* lock_timeout, statement_timeout, synchronous_commit (db_pg.c's top). */
int dbp_session(struct db *db);
/* Run sql with n text parameters (NULL: SQL NULL). On success r->res holds
 * the result (the caller PQclear's it); on failure AL_E_* with the message
 * set and r->state / r->constraint telling what was violated. */
int dbp_exec(struct db *db, const char *what, const char *sql, int n, const char *const *params,
             struct dbp_res *r);
/* A statement whose result is not needed. */
int dbp_run(struct db *db, const char *what, const char *sql, int n, const char *const *params);
/* Whether exactly one row was inserted, updated or deleted. */
bool dbp_one_changed(PGresult *res);
int dbp_begin(struct db *db);
int dbp_commit(struct db *db);
/* Roll back an open transaction after an error, keeping its message. */
void dbp_rollback(struct db *db);
/* Each row of a result already read (an UPDATE ... RETURNING: a cursor
 * only selects) to fn, until it returns non-zero. */
int dbp_rows(struct db *db, PGresult *res, db_row_fn fn, void *ctx);
/* A query's first row through fn(row, out); *found: whether it had one. */
int dbp_one(struct db *db, const char *what, const char *sql, int n, const char *const *params,
            db_row_fn fn, void *out, bool *found);
/* Every row of a query through fn(row, ctx), until fn returns non-zero
 * (returned as is), through a cursor a batch at a time. */
int dbp_list(struct db *db, const char *what, const char *sql, int n, const char *const *params,
             db_row_fn fn, void *ctx);

/* db_pg_exec.c: column readers, for the few reads outside struct db_row */
int dbp_col_i64(struct db *db, const PGresult *res, int row, int col, int64_t lo, int64_t hi,
                const int64_t *null_value, int64_t *out);
int dbp_col_bool(struct db *db, const PGresult *res, int row, int col, bool *out);
/* v in decimal, as a text parameter (buf: DBP_INT_TEXT bytes). */
void dbp_i64_text(char *buf, size_t cap, int64_t v);

#endif
