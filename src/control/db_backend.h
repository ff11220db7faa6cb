/*
 * db_backend: what a storage backend of db.h implements, and the helpers
 * every file of the data layer shares (db.c). Internal to the data layer:
 * only its db*.c files (the public calls, db_user.c ... db_audit.c, and
 * the backends, db_sqlite*.c, db_pg*.c) include it.
 *
 * Data model: struct db is the handle db.h hands out. db.c owns it; the
 * public calls (db_user.c, db_sandbox.c, db_terminal.c, db_session.c,
 * db_proxy.c, db_audit.c) validate every input (names, enums, JSON, sizes, state
 * transitions), generate keys and ids and read the clock; a backend only
 * stores and
 * fetches, through db->impl (its own state, created by open and freed by
 * close), and reports failures with db_fail(). Every backend function
 * returns AL_OK or a negative AL_E_* code; "cas" variants change a row only
 * if it is still in the state the public call read (compare-and-set), and
 * return
 * AL_E_STATE when it no longer is.
 */
#ifndef DB_BACKEND_H
#define DB_BACKEND_H

#include "db.h"

enum { DB_HASH_HEX = 64 }; /* hex SHA-256 of a secret, as stored */

struct db_backend {
    const char *scheme; /* "sqlite", "postgres" */
    /* where: what follows "sqlite:", or a PostgreSQL URL whole (db.c).
     * After a failed open, db.c calls close (the message already kept),
     * which frees whatever open made, db->impl NULL or not. */
    int (*open)(struct db *db, const char *where);
    int (*close)(struct db *db);

    int (*user_add)(struct db *db, const char *name, enum db_role role, const char *key_sha256,
                    int64_t now);
    int (*user_by_hash)(struct db *db, const char *key_sha256, struct db_user *out);
    int (*user_list)(struct db *db, db_user_cb cb, void *ctx);
    int (*user_remove)(struct db *db, const char *name);

    /* spec checked by db_sandbox.c; url NULL unless static */
    int (*sandbox_add)(struct db *db, const struct db_sandbox_spec *spec, int64_t now);
    int (*sandbox_get)(struct db *db, const char *id, struct db_sandbox *out);
    int (*sandbox_list)(struct db *db, db_sandbox_cb cb, void *ctx);
    /* Fenced writes (fence >= 0) change nothing unless the sandbox's fence
     * is still fence: sandbox_set_link then fails AL_E_PERM, the terminals'
     * calls as if the row were not there (db_terminal.c tells which). */
    int (*sandbox_set_link)(struct db *db, const char *id, bool up, int64_t since, int64_t rtt_us,
                            int64_t fence);
    int (*sandbox_set_record_input)(struct db *db, const char *id, bool on);
    int (*sandbox_remove)(struct db *db, const char *id);

    int (*terminal_add)(struct db *db, const char *id, const struct db_terminal_spec *spec,
                        int64_t now);
    int (*terminal_get)(struct db *db, const char *id, struct db_terminal *out);
    int (*terminal_list)(struct db *db, const char *sandbox_id, db_terminal_cb cb, void *ctx);
    /* state from -> to; ended_at = now if entering a final state and unset. */
    int (*terminal_cas_state)(struct db *db, const char *id, enum db_term_state from,
                              enum db_term_state to, int64_t now, int64_t fence);
    int (*terminal_cas_exit)(struct db *db, const char *id, enum db_term_state from, int code,
                             int signo, int64_t now, int64_t fence);
    /* AL_E_STATE if a stored value is larger than the new one (a time:
     * when both are known); rec_time_us -1 is stored as NULL. */
    int (*terminal_set_offsets)(struct db *db, const char *id, const struct db_term_offsets *o,
                                int64_t fence);
    /* The fence of the terminal's sandbox (AL_E_NOENT: no such terminal). */
    int (*terminal_fence)(struct db *db, const char *id, int64_t *fence);
    int (*terminal_cas_remove)(struct db *db, const char *id, enum db_term_state from);

    /* Web sessions, by hex SHA-256 of the secret. add: AL_E_LIMIT when the
     * user has max rows already, AL_E_NOENT when there is no such user.
     * get: the row with its user and the CSRF token's hash (csrf_hex,
     * DB_HASH_HEX + 1 bytes). expire: delete rows with expires_at <= now or (idle_ms > 0)
     * last_seen <= now - idle_ms. */
    int (*session_add)(struct db *db, const char *id_sha256, const char *csrf_sha256,
                       const char *user, int64_t now, int64_t expires_at, unsigned max);
    int (*session_get)(struct db *db, const char *id_sha256, struct db_session *out,
                       char *csrf_hex);
    int (*session_touch)(struct db *db, const char *id_sha256, int64_t now);
    int (*session_remove)(struct db *db, const char *id_sha256);
    int (*session_expire)(struct db *db, int64_t now, int64_t idle_ms);

    /* Proxy credentials. add: AL_E_NOENT when there is no such terminal,
     * AL_E_EXISTS for a hash stored already. get: the row of a hash with
     * its terminal's state (AL_E_NOENT when there is none). revoke_*:
     * revoked = now on the live rows of a terminal, or of every terminal
     * not opening or running. of_terminal: its newest row. */
    int (*proxy_add)(struct db *db, const char *hash_hex, const char *terminal_id,
                     const char *upstreams, int64_t now);
    int (*proxy_get)(struct db *db, const char *hash_hex, struct db_proxy *out,
                     enum db_term_state *term_state);
    int (*proxy_revoke_terminal)(struct db *db, const char *terminal_id, int64_t now);
    int (*proxy_revoke_ended)(struct db *db, int64_t now);
    int (*proxy_of_terminal)(struct db *db, const char *terminal_id, struct db_proxy *out);

    /* Replicas: now is the database's clock, read in the statement. */
    int (*replica_beat)(struct db *db, const char *id, const char *address);
    int (*replica_stop)(struct db *db, const char *id);
    int (*replica_list)(struct db *db, int64_t stale_ms, db_replica_cb cb, void *ctx);
    int (*replica_prune)(struct db *db, int64_t keep_ms);
    /* jwks checked by db_replica.c; list: rows with keys only */
    int (*replica_set_jwks)(struct db *db, const char *id, const char *jwks);
    int (*replica_jwks_list)(struct db *db, db_replica_jwks_cb cb, void *ctx);

    /* Leases (db.h), each one statement reading the database's clock.
     * take: AL_E_STATE when not taken (db_lease.c tells why); move: AL_E_NOENT
     * without the sandbox. */
    int (*lease_take)(struct db *db, const char *sandbox_id, const char *replica_id,
                      int64_t stale_ms, int64_t lease_ms, int64_t *fence);
    int (*lease_take_free)(struct db *db, const char *replica_id, int64_t stale_ms,
                           int64_t lease_ms, db_lease_cb cb, void *ctx);
    int (*lease_move)(struct db *db, const char *sandbox_id, const char *replica_id,
                      int64_t lease_ms, int64_t *fence);
    int (*lease_renew)(struct db *db, const char *replica_id, int64_t lease_ms, db_lease_cb cb,
                       void *ctx);
    int (*lease_release)(struct db *db, const char *replica_id);

    /* Runner keys (db.h), inputs checked by db_runner_key.c. pin: the pin
     * in force into pinned (DB_HASH_HEX + 1 bytes), AL_E_NOENT without the
     * sandbox; set: hash NULL forgets, fence as sandbox_set_link's. */
    int (*runner_key_pin)(struct db *db, const char *sandbox_id, const char *hash, char *pinned);
    int (*runner_key_set)(struct db *db, const char *sandbox_id, const char *hash, int64_t fence);

    /* sandbox_id and fence: a fenced row (fence >= 0), else NULL and -1;
     * AL_E_PERM, nothing added, when the fence moved on. */
    int (*audit_add)(struct db *db, int64_t at, const char *actor, const char *action,
                     const char *target, const char *detail_json, const char *sandbox_id,
                     int64_t fence);
    /* n >= 1 rows, checked and with their defaults (at set), in one
     * transaction: all stored in order, or none. */
    int (*audit_add_batch)(struct db *db, const struct db_audit_row *rows, size_t n);
    int (*audit_query)(struct db *db, const struct db_audit_filter *f, db_audit_cb cb, void *ctx);
    int (*audit_prune)(struct db *db, int64_t before_at, uint64_t keep_rows);
};

struct db {
    const struct db_backend *be;
    void *impl; /* the backend's, from open until close */
    char msg[DB_MSG_MAX];
};

/* Set db->msg from the format and return code (a negative AL_E_*). */
__attribute__((format(printf, 3, 4))) int db_fail(struct db *db, int code, const char *fmt, ...);

/* db.h's enum parsers with an int out, for a backend's column readers. */
int db_parse_role_int(const char *s, int *out);
int db_parse_kind_int(const char *s, int *out);
int db_parse_network_int(const char *s, int *out);
int db_parse_mode_int(const char *s, int *out);
int db_parse_state_int(const char *s, int *out);

/* The wall clock in Unix milliseconds. */
int db_now(int64_t *out);
/* The same, failing with db's message set. */
int db_now_or_fail(struct db *db, int64_t *now);
/* The start of every public call on an open db: AL_E_INVAL for NULL, else
 * the message cleared. */
int db_begin(struct db *db);

extern const struct db_backend db_sqlite_backend;
extern const struct db_backend db_pg_backend; /* in al_control, with libpq */

#endif
