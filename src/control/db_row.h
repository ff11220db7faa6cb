/*
 * db_row: what the two SQL backends (db_sqlite*.c, db_pg*.c) share about
 * rows: the column lists of their SELECTs, one decoder per kind of row
 * (db_row.c), and the glue that hands a listing's rows to db.h's
 * callbacks. Internal to the data layer.
 *
 * Data model: struct db_row is one row of a result as a backend holds it
 * (res: a sqlite3_stmt, a PGresult; row: its index in res, 0 for SQLite),
 * read through the backend's four column readers (ops). A reader checks
 * the column's type and range and fails AL_E_FORMAT ("corrupt row") with
 * db's message set; a decoder stops at the first failure. Columns are
 * read by position: a decoder's order is its list's (DB_*_COLS).
 */
#ifndef DB_ROW_H
#define DB_ROW_H

#include "db.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DB_USER_COLS "name, role, created_at"
#define DB_SANDBOX_COLS                                                                            \
    "id, kind, url, created_at, link_up, link_since, link_rtt_us, record_input, network,"          \
    " platform, identifier, owner, fence, lease_until"
#define DB_TERM_COLS                                                                               \
    "id, sandbox_id, channel, argv, cwd, env, cols, rows, mode, state, exit_code, exit_signal,"    \
    " created_at, ended_at, out_offset, err_offset, rec_bytes, creator, record_input,"             \
    " rec_time_us, rec_exited"
#define DB_AUDIT_COLS "id, at, actor, action, target, detail"
/* A session with its user (sessions s JOIN users u). */
#define DB_SESSION_COLS                                                                            \
    "u.name, u.role, u.created_at, s.csrf_sha256, s.created_at, s.last_seen, s.expires_at"

/* A proxy credential with its terminal's state (proxy_credentials p JOIN
 * terminals t). */
#define DB_PROXY_COLS "p.terminal_id, p.upstreams, p.revoked, p.revoked_at, p.created_at, t.state"

struct db_row;

struct db_row_ops {
    /* Text into buf[cap]; a NULL reads as "" when null_ok. */
    int (*text)(const struct db_row *r, int col, char *buf, size_t cap, bool null_ok);
    /* An integer in [lo, hi]; a NULL reads as *null_value when given. */
    int (*i64)(const struct db_row *r, int col, int64_t lo, int64_t hi, const int64_t *null_value,
               int64_t *out);
    /* A boolean (SQLite: 0 or 1). */
    int (*flag)(const struct db_row *r, int col, bool *out);
    /* An enumeration stored as its name, read with parse (db_backend.h). */
    int (*enumv)(const struct db_row *r, int col, int (*parse)(const char *, int *), int *out);
};

struct db_row {
    struct db *db;
    const struct db_row_ops *ops;
    void *res;
    int row;
};

int db_row_user(const struct db_row *r, struct db_user *u);         /* DB_USER_COLS */
int db_row_sandbox(const struct db_row *r, struct db_sandbox *sb);  /* DB_SANDBOX_COLS */
int db_row_terminal(const struct db_row *r, struct db_terminal *t); /* DB_TERM_COLS */
int db_row_audit(const struct db_row *r, struct db_audit *a);       /* DB_AUDIT_COLS */
/* DB_SESSION_COLS; the CSRF token's hash into csrf_hex[DB_HASH_HEX + 1]. */
int db_row_session(const struct db_row *r, struct db_session *s, char *csrf_hex);

/* DB_PROXY_COLS; the terminal's state into *term_state. */
int db_row_proxy(const struct db_row *r, struct db_proxy *p, enum db_term_state *term_state);

/* A listing in progress: the caller's callback and context, and the row
 * handed to it (on the heap but for users: struct db_terminal is large);
 * db_row_list_start allocates it, db_row_list_end frees it. */
struct db_row_list {
    union {
        db_user_cb user;
        db_sandbox_cb sandbox;
        db_terminal_cb terminal;
        db_audit_cb audit;
        db_replica_cb replica;
        db_replica_jwks_cb jwks;
    } cb;
    void *ctx;
    void *row;
};

/* A backend's row loop calls one of these per row, with the listing as
 * ctx: decode, then the callback; its non-zero return stops the loop. */
typedef int (*db_row_fn)(const struct db_row *r, void *ctx);
int db_row_list_user(const struct db_row *r, void *ctx);
int db_row_list_sandbox(const struct db_row *r, void *ctx);
int db_row_list_terminal(const struct db_row *r, void *ctx);
int db_row_list_audit(const struct db_row *r, void *ctx);
/* A replica's columns: id, address, started_at, beat_at, stopped_at and
 * alive, a boolean each backend's query computes from its own clock. */
int db_row_list_replica(const struct db_row *r, void *ctx);
/* A replica's published keys: id, jwks; the listing's row buffer holds
 * DB_REPLICA_JWKS_MAX + 1 bytes (db_row_list_start). */
int db_row_list_jwks(const struct db_row *r, void *ctx);
/* A lease's columns: sandbox id, fence; ctx a struct db_row_lease. */
struct db_row_lease {
    db_lease_cb cb;
    void *ctx;
};
int db_row_list_lease(const struct db_row *r, void *ctx);
/* One column, a fence, into *(int64_t *)out. */
int db_row_one_fence(const struct db_row *r, void *out);
/* One column, a hex SHA-256, into (char *)out (DB_HASH_HEX + 1 bytes). */
int db_row_one_hash(const struct db_row *r, void *out);

/* For a lookup of one row (out: the struct to fill): the decoders with a
 * db_row_fn's signature. A session's out is a struct db_row_session_out. */
int db_row_one_user(const struct db_row *r, void *out);
int db_row_one_sandbox(const struct db_row *r, void *out);
int db_row_one_terminal(const struct db_row *r, void *out);
struct db_row_session_out {
    struct db_session *s;
    char *csrf_hex; /* DB_HASH_HEX + 1 bytes */
};
int db_row_one_session(const struct db_row *r, void *out);
struct db_row_proxy_out {
    struct db_proxy *p;
    enum db_term_state *term_state;
};
int db_row_one_proxy(const struct db_row *r, void *out);

/* l's row buffer of size bytes (AL_E_NOMEM with db's message set). */
int db_row_list_start(struct db *db, struct db_row_list *l, size_t size);
void db_row_list_end(struct db_row_list *l);

#endif
