/*
 * db: the control plane's data layer. One small interface over a storage
 * backend chosen by a URL-ish string: "sqlite:PATH" (db_sqlite*.c, the
 * default: DATA/airlock.db) or a libpq URL "postgres://..." /
 * "postgresql://..." (db_pg*.c; the database must exist, the tables are
 * made and migrated on open). Both keep the same rules, schema version and
 * error codes; see each backend's comment for what differs underneath.
 * A URL is never echoed in a message: a PostgreSQL one may hold a password.
 * Control plane only (al_control).
 *
 * Data model (what the database holds; times are Unix milliseconds):
 *   users      name ([a-z0-9._-], 1..DB_NAME_MAX, first a letter or digit),
 *              role, hex SHA-256 of the API key (never the key), created_at.
 *              An API key is "alk_" + base64url of 32 random bytes; it has
 *              256 bits of entropy, so a plain SHA-256 is enough (no salt,
 *              no slow hash: nothing to brute-force).
 *   sandboxes  id (same alphabet as names), kind, url (static and aca),
 *              created_at, record_input (whether recordings keep the
 *              writer's keystrokes; false by default, schema 2), network
 *              (local only, schema 4: "host", "none" for agents with
 *              loopback only, or "default": whatever airlockd's
 *              --sandbox-network says each time it starts the runner;
 *              sandboxes made before schema 4 have "default"), and the
 *              link state airlockd keeps current: up or down, since when,
 *              last RTT in microseconds (-1 unknown). Schema 6: kind
 *              "aca", whose url is its platform pool's endpoint, with its
 *              platform's name and its session identifier (generated:
 *              "al-" and 32 random hex digits; unique).
 *   terminals  id ("t-" + 24 hex), sandbox id (must exist; a sandbox with
 *              terminals cannot be removed), channel on the sandbox's link
 *              (unique among the sandbox's live terminals: opening, running,
 *              exited), argv (JSON array of strings), cwd, env (JSON object of
 *              strings), size, mode, state, exit status, created/ended_at,
 *              and the stream offsets durably delivered (bytes of stdout and
 *              stderr) with the recording's size in bytes: airlockd resumes
 *              every terminal from them after a restart. They only grow.
 *              Schema 2: creator (the user who made it; "" for terminals
 *              made before) and record_input (fixed at creation).
 *   audit      id (grows), at, actor (a user name or "system"), action
 *              ([a-z][a-z0-9_]*), target, detail (a JSON object).
 *   sessions   the web page's sign-ins: hex SHA-256 of the session secret
 *              (the cookie, "als_" + base64url of 32 random bytes) and of
 *              its CSRF token ("alc_" + the same), never either secret;
 *              the user (removing the user removes their sessions),
 *              created_at, last_seen (the last accepted use) and
 *              expires_at (absolute: never extended). At most
 *              DB_SESSIONS_PER_USER_MAX per user; expired ones are deleted
 *              when met and whenever a session is added.
 *   proxy_credentials (schema 5) the credential proxy's per-terminal
 *              credentials (docs/proxy.md): hex SHA-256 of the credential
 *              (never the credential: it has 256 bits of entropy, a plain
 *              hash is enough), the terminal it belongs to (removing the
 *              terminal removes it), the upstreams it opens (1 to
 *              DB_PROXY_UPSTREAMS_MAX names of [a-z0-9_-], at most
 *              DB_PROXY_NAME_MAX each, stored "a,b"), revoked and
 *              revoked_at, created_at. A credential opens an upstream only
 *              while it is not revoked and its terminal is opening or
 *              running.
 *   replicas   (schema 7) the airlockd processes serving this database
 *              (db_replica.c; docs/scale-out.md): id ("r-" + 24 hex,
 *              random at each start of a process), the address other
 *              replicas reach it at (a ws:// or wss:// URL), started_at,
 *              beat_at (its last heartbeat), stopped_at (set by a clean
 *              stop; NULL while it runs). Every time in this table is the
 *              database's clock, never a replica's: replicas' clocks may
 *              differ, the database's is the one they share. A replica is
 *              alive while it is not stopped and its beat is younger
 *              than the caller's staleness; rows whose beat is older than
 *              the caller's horizon are deleted (db_replica_prune).
 *              Schema 11: jwks, the public keys the replica signs with (a
 *              JWKS, compact JSON; NULL until it publishes them): every
 *              replica accepts the tokens any registered replica minted
 *              (docs/scale-out.md, "Trust between replicas"); the database
 *              is trusted, the sandbox never reaches it.
 *   leases     (schema 9, columns of sandboxes; db_lease.c) which replica
 *              owns the sandbox's runner link: owner (a replica id, NULL
 *              when free), fence (grows by one at every change of owner,
 *              never goes back; 0 before the first) and lease_until (the
 *              database's clock, Unix ms; NULL when free). Only the owner
 *              dials, starts or keeps the runner's link, and the relay's
 *              writes about the sandbox carry its fence (the *_fenced
 *              calls): the database refuses them once the fence moved on.
 *   runner keys (schema 10, a column of sandboxes; db_runner_key.c)
 *              runner_key: the hex SHA-256 of the key the sandbox's
 *              dialing runner must present (rkey.h), NULL before the
 *              first; beside the lease, so that every replica checks the
 *              same pin (an impostor reaching a replica that never saw
 *              the runner is refused there too). Never in db_sandbox:
 *              nothing lists it.
 *
 * Ownership: struct db is opaque, one per db_open, freed by db_close, used
 * by one thread at a time. Inputs are caller-owned strings; outputs are
 * plain structs with fixed-size buffers the caller provides. List functions
 * call a callback per row with a struct valid only during the call; the
 * callback should not use the same db (both backends still deliver every
 * row if it does, since airlockd's relay audits from one, but db_errmsg()
 * then tells of the inner call); a non-zero return stops the listing and
 * is returned as is.
 *
 * Errors: AL_OK or a negative AL_E_* code; db_errmsg() then says why in one
 * line (never containing an API key). Bad input is AL_E_INVAL (AL_E_TOOBIG
 * for a size over its limit), unknown objects AL_E_NOENT, duplicates
 * AL_E_EXISTS, a forbidden change of state AL_E_STATE.
 */
#ifndef DB_H
#define DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DB_FILE_NAME "airlock.db" /* in the data directory */
#define DB_SQLITE_PREFIX "sqlite:"
#define DB_KEY_PREFIX "alk_"

enum {
    DB_SCHEMA_VERSION = 11,        /* the newest schema this code knows */
    DB_PATH_MAX = 4096,            /* a database path */
    DB_URL_MAX = 4160,             /* the whole URL given to db_open */
    DB_MSG_MAX = 512,              /* an error message, with its NUL */
    DB_NAME_MAX = 64,              /* user names, sandbox and terminal ids */
    DB_KEY_RAW_LEN = 32,           /* random bytes in an API key */
    DB_KEY_LEN = 47,               /* "alk_" + 43 base64url characters */
    DB_SANDBOX_URL_MAX = 2048,     /* a static sandbox's ws:// or wss:// URL */
    DB_ARGV_JSON_MAX = 16384,      /* bytes of argv JSON; argv + env + cwd at */
    DB_ENV_JSON_MAX = 16384,       /* their limits fit one OPEN frame */
    DB_CWD_MAX = 4096,             /* AL_MAX_STR */
    DB_ACTION_MAX = 32,            /* an audit action */
    DB_TARGET_MAX = 256,           /* an audit target */
    DB_DETAIL_MAX = 4096,          /* an audit detail (JSON text) */
    DB_AUDIT_LIMIT_MAX = 1000,     /* rows one audit query may return */
    DB_AUDIT_BATCH_MAX = 1000,     /* rows one db_audit_add_batch may write */
    DB_BUSY_TIMEOUT_MS = 5000,     /* wait for a lock held by another process */
    DB_SESSION_RAW_LEN = 32,       /* random bytes in a session secret or CSRF token */
    DB_SESSION_LEN = 47,           /* "als_" / "alc_" + 43 base64url characters */
    DB_SESSIONS_PER_USER_MAX = 32, /* live sessions of one user */
    DB_SESSION_HANDLE_LEN = 64,    /* a session's handle: hex SHA-256 of its secret */
    DB_KEY_HANDLE_LEN = 64,        /* an API key's handle: hex SHA-256 of the key */
    DB_PROXY_NAME_MAX = 32,        /* an upstream's name (proxycfg's PROXY_NAME_MAX) */
    DB_PROXY_UPSTREAMS_MAX = 16,   /* upstreams one credential opens */
    /* "a,b,...": the stored list of upstreams, without its NUL */
    DB_PROXY_UPSTREAMS_TEXT_MAX = DB_PROXY_UPSTREAMS_MAX * (DB_PROXY_NAME_MAX + 1) - 1,
    DB_PROXY_HASH_HEX = 64,      /* hex SHA-256 of a proxy credential */
    DB_PLATFORM_MAX = 32,        /* an aca sandbox's platform name (PLATFORM_NAME_MAX) */
    DB_IDENT_MIN = 4,            /* a platform session identifier: 4..128 */
    DB_IDENT_MAX = 128,          /* of [A-Za-z0-9_-] (what ACA accepts) */
    DB_REPLICA_ID_RANDOM = 12,   /* random bytes in a replica id */
    DB_REPLICA_ID_LEN = 26,      /* "r-" + 24 hex digits */
    DB_REPLICA_ADDR_MAX = 256,   /* a replica's address: a ws:// or wss:// URL */
    DB_REPLICAS_LIST_MAX = 1000, /* rows one db_replica_list returns at most */
    DB_RUNNER_KEY_HEX = 64,      /* a pinned runner key: hex SHA-256 (rkey.h) */
    DB_REPLICA_JWKS_MAX = 65536, /* a replica's public keys, JWKS text (TOK_MAX_JWKS_BYTES) */
    DB_NO_FENCE = -1             /* a write not fenced (db_*_fenced) */
};

#define DB_SESSION_PREFIX "als_"
#define DB_CSRF_PREFIX "alc_"
#define DB_SESSION_TTL_MAX_MS (30LL * 24 * 3600 * 1000) /* an absolute lifetime */

/* Ordered by privilege: a role includes what the ones below it may do. */
enum db_role { DB_ROLE_VIEWER, DB_ROLE_OPERATOR, DB_ROLE_ADMIN };
/* aca: a session of a managed platform's pool, dialed through its front
 * with the platform's token (docs/aca.md). */
enum db_sandbox_kind { DB_SANDBOX_LOCAL, DB_SANDBOX_STATIC, DB_SANDBOX_REVERSE, DB_SANDBOX_ACA };
/* A local sandbox's agents: the server-wide setting, the host's network,
 * or a network namespace with loopback only. Anything but DEFAULT is for
 * local sandboxes only (airlockd starts no other runner). */
enum db_sandbox_network { DB_NETWORK_DEFAULT, DB_NETWORK_HOST, DB_NETWORK_NONE };
enum db_term_mode { DB_MODE_PTY, DB_MODE_PIPES };
enum db_term_state {
    DB_TERM_OPENING, /* created; the runner has not confirmed it yet */
    DB_TERM_RUNNING,
    DB_TERM_EXITED, /* exit status known; the channel may still drain */
    DB_TERM_CLOSED, /* final: the channel is closed */
    DB_TERM_LOST,   /* final: the runner no longer knows it */
};

struct db;

struct db_user {
    char name[DB_NAME_MAX + 1];
    enum db_role role;
    int64_t created_at;
};

struct db_sandbox {
    char id[DB_NAME_MAX + 1];
    enum db_sandbox_kind kind;
    char url[DB_SANDBOX_URL_MAX + 1]; /* static: the runner; aca: the pool; else "" */
    int64_t created_at;
    bool link_up;
    int64_t link_since; /* when link_up last changed (created_at at first) */
    int64_t rtt_us;     /* -1: unknown */
    bool record_input;  /* recordings keep input ("i" events) */
    enum db_sandbox_network network;
    char platform[DB_PLATFORM_MAX + 1]; /* aca: its platform's name; else "" */
    char identifier[DB_IDENT_MAX + 1];  /* aca: its session's identifier; else "" */
    char owner[DB_REPLICA_ID_LEN + 1];  /* the replica holding its lease; "": none */
    int64_t fence;                      /* grows at each change of owner (schema 9) */
    int64_t lease_until;                /* the database's clock, Unix ms; 0: free */
};

/* What db_sandbox_create needs; the strings stay the caller's. */
struct db_sandbox_spec {
    const char *id;
    enum db_sandbox_kind kind;
    const char *url; /* static and aca only; NULL or "" otherwise */
    bool record_input;
    enum db_sandbox_network network; /* DB_NETWORK_DEFAULT unless local */
    const char *platform;            /* aca only: a platform's name */
    const char *identifier;          /* aca only; NULL: db_sandbox_create generates one */
};

/* What db_terminal_add needs; the strings stay the caller's. */
struct db_terminal_spec {
    const char *sandbox_id;
    uint32_t channel;      /* 1..UINT32_MAX */
    const char *argv_json; /* ["cmd", "arg", ...]: 1..AL_MAX_ARGV strings */
    const char *cwd;       /* "" or NULL: the runner's default */
    const char *env_json;  /* {"NAME": "value", ...}; NULL: {} */
    uint16_t cols, rows;   /* 1..AL_MAX_COLS, 1..AL_MAX_ROWS */
    enum db_term_mode mode;
    const char *creator; /* a user name; NULL or "": none */
    bool record_input;   /* its recording keeps input */
};

struct db_terminal {
    char id[DB_NAME_MAX + 1];
    char sandbox_id[DB_NAME_MAX + 1];
    uint32_t channel;
    char argv_json[DB_ARGV_JSON_MAX + 1];
    char cwd[DB_CWD_MAX + 1];
    char env_json[DB_ENV_JSON_MAX + 1];
    uint16_t cols, rows;
    enum db_term_mode mode;
    enum db_term_state state;
    int exit_code;   /* 0..255, or -1 (none, or killed by a signal) */
    int exit_signal; /* 1..127 when killed by a signal, else 0 */
    int64_t created_at;
    int64_t ended_at;                /* 0 until exited, closed or lost */
    uint64_t out_offset, err_offset; /* stream bytes durably delivered */
    uint64_t rec_bytes;              /* the recording's size with them */
    char creator[DB_NAME_MAX + 1];   /* "": unknown (made before schema 2) */
    bool record_input;
    int64_t rec_time_us; /* the time of the recording's last event within
                            rec_bytes (µs since its start); -1: not stored
                            (a row from before schema 8) */
    bool rec_exited;     /* the recording's exit event lies within rec_bytes */
};

/* What db_terminal_set_offsets stores in one update. */
struct db_term_offsets {
    uint64_t out_offset, err_offset; /* stream bytes durably delivered */
    uint64_t rec_bytes;              /* the recording's durable size with them */
    int64_t rec_time_us;             /* its last event's time then; -1: not known */
    bool rec_exited;                 /* it holds its exit event (needs the time) */
};

struct db_audit {
    int64_t id;
    int64_t at;
    char actor[DB_NAME_MAX + 1];
    char action[DB_ACTION_MAX + 1];
    char target[DB_TARGET_MAX + 1];
    char detail[DB_DETAIL_MAX + 1];
};

struct db_audit_filter {
    int64_t since;      /* at >= since; 0: from the start */
    const char *actor;  /* NULL: any */
    const char *action; /* NULL: any */
    unsigned limit;     /* 1..DB_AUDIT_LIMIT_MAX rows, newest first */
};

/* How long a session lives, in ms: ttl_ms from its creation whatever
 * happens (1..DB_SESSION_TTL_MAX_MS), and idle_ms after its last use
 * (0: no idle limit; else 1..ttl_ms). */
struct db_session_policy {
    int64_t ttl_ms;
    int64_t idle_ms;
};

struct db_session {
    struct db_user user; /* as the users table has it now (role changes apply) */
    int64_t created_at, last_seen, expires_at;
};

/* A terminal's proxy credential, as db_proxy_of_terminal reads it. */
struct db_proxy {
    char terminal_id[DB_NAME_MAX + 1];
    char upstreams[DB_PROXY_UPSTREAMS_TEXT_MAX + 1]; /* "a,b" */
    bool revoked;
    int64_t revoked_at; /* 0 unless revoked */
    int64_t created_at;
};

/* A replica as db_replica_list reads it; times are the database's clock. */
struct db_replica {
    char id[DB_REPLICA_ID_LEN + 1];
    char address[DB_REPLICA_ADDR_MAX + 1];
    int64_t started_at, beat_at;
    int64_t stopped_at; /* 0 while it runs */
    bool alive;         /* not stopped, and its beat younger than the staleness asked */
};

typedef int (*db_replica_cb)(void *ctx, const struct db_replica *r);
typedef int (*db_lease_cb)(void *ctx, const char *sandbox_id, int64_t fence);
typedef int (*db_replica_jwks_cb)(void *ctx, const char *replica_id, const char *jwks);
typedef int (*db_user_cb)(void *ctx, const struct db_user *u);
typedef int (*db_sandbox_cb)(void *ctx, const struct db_sandbox *sb);
typedef int (*db_terminal_cb)(void *ctx, const struct db_terminal *t);
typedef int (*db_audit_cb)(void *ctx, const struct db_audit *a);

/* Open (creating and migrating as needed) the database at url. Refuses a
 * database whose schema is newer than DB_SCHEMA_VERSION (AL_E_VERSION). */
int db_open(const char *url, struct db **out, char *err, size_t cap);
/* Close and free (NULL is fine); the error, if any, of closing. */
int db_close(struct db *db);
/* Why the last call on db failed ("" after a success). */
const char *db_errmsg(const struct db *db);

/* Names: user names, sandbox and terminal ids. */
bool db_name_valid(const char *s);
/* An upstream's name, s[0..n): 1..DB_PROXY_NAME_MAX of [a-z0-9_-] (the one
 * rule for the config, the API and the credentials' table; inline, so that
 * proxycfg, which links no data layer, shares it). */
static inline bool db_proxy_name_valid(const char *s, size_t n)
{
    if (!s || n == 0 || n > DB_PROXY_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
              s[i] == '-'))
            return false;
    return true;
}
const char *db_role_name(enum db_role r);
int db_role_parse(const char *s, enum db_role *out);
const char *db_sandbox_kind_name(enum db_sandbox_kind k);
int db_sandbox_kind_parse(const char *s, enum db_sandbox_kind *out);
const char *db_sandbox_network_name(enum db_sandbox_network n); /* "default", "host", "none" */
int db_sandbox_network_parse(const char *s, enum db_sandbox_network *out);
const char *db_term_mode_name(enum db_term_mode m);
int db_term_mode_parse(const char *s, enum db_term_mode *out);
const char *db_term_state_name(enum db_term_state s);
int db_term_state_parse(const char *s, enum db_term_state *out);

/* Users. db_user_add writes the new API key (NUL-terminated, shown once)
 * to key_out (cap > DB_KEY_LEN); AL_E_EXISTS if the name is taken. */
int db_user_add(struct db *db, const char *name, enum db_role role, char *key_out, size_t cap);
/* The user holding this API key: AL_E_INVAL if it is malformed, AL_E_NOENT
 * if no user holds it. */
int db_user_by_key(struct db *db, const char *key, struct db_user *out);
/* An API key's handle: what its user's row is keyed by (hex SHA-256 of the
 * key, DB_KEY_HANDLE_LEN characters and a NUL into out, cap > that), so that a
 * caller may follow a key without keeping it. AL_E_INVAL for a malformed
 * key. */
int db_user_key_handle(struct db *db, const char *key, char *out, size_t cap);
/* The user holding the key of a handle: AL_OK (out filled), AL_E_NOENT (no
 * user holds it: removed), AL_E_INVAL (not a handle). */
int db_user_by_handle(struct db *db, const char *handle, struct db_user *out);
int db_user_list(struct db *db, db_user_cb cb, void *ctx); /* by name */
int db_user_remove(struct db *db, const char *name);

/* Sandboxes. url is required for static ones and refused for the others;
 * a network other than DB_NETWORK_DEFAULT is refused but for local ones.
 * One row in one statement: every setting is in place from the start. */
int db_sandbox_create(struct db *db, const struct db_sandbox_spec *spec);
/* The same with record_input off and the default network. */
int db_sandbox_add(struct db *db, const char *id, enum db_sandbox_kind kind, const char *url);
int db_sandbox_get(struct db *db, const char *id, struct db_sandbox *out);
int db_sandbox_list(struct db *db, db_sandbox_cb cb, void *ctx); /* by id */
/* since: when the link went up or down; rtt_us: -1 if unknown. */
int db_sandbox_set_link(struct db *db, const char *id, bool up, int64_t since, int64_t rtt_us);
/* Whether the sandbox's new terminals record their input. */
int db_sandbox_set_record_input(struct db *db, const char *id, bool on);
/* AL_E_STATE while terminals refer to it. */
int db_sandbox_remove(struct db *db, const char *id);

/* Terminals. A new terminal is "opening"; its id goes to id_out
 * (cap > DB_NAME_MAX). */
int db_terminal_add(struct db *db, const struct db_terminal_spec *spec, char *id_out, size_t cap);
int db_terminal_get(struct db *db, const char *id, struct db_terminal *out);
/* In creation order; sandbox_id NULL: every sandbox. */
int db_terminal_list(struct db *db, const char *sandbox_id, db_terminal_cb cb, void *ctx);
/* To running, closed or lost. opening -> running -> exited -> closed, and
 * any live state -> lost; the same state again is a no-op; anything else is
 * AL_E_STATE. Entering exited, closed or lost sets ended_at. */
int db_terminal_set_state(struct db *db, const char *id, enum db_term_state state);
/* To exited with the EXIT frame's status: signo 0 and code 0..255, or signo
 * 1..127 and code -1. Repeating the same status is a no-op. */
int db_terminal_set_exit(struct db *db, const char *id, int code, int signo);
/* Both offsets and the recording's size, time and exit in one atomic,
 * durable (fsync'ed) update; AL_E_STATE if an offset, the size or a known
 * time would go backwards (a time not known is stored as such). */
int db_terminal_set_offsets(struct db *db, const char *id, const struct db_term_offsets *o);
/* Only a closed or lost terminal (AL_E_STATE otherwise). */
int db_terminal_remove(struct db *db, const char *id);

/* Web sessions; now is Unix ms, passed in (tests move the clock).
 * db_session_add writes the new secret and CSRF token (each
 * DB_SESSION_LEN characters and a NUL, shown once) to id_out and csrf_out
 * (cap > DB_SESSION_LEN each); AL_E_NOENT if there is no such user,
 * AL_E_LIMIT when the user has DB_SESSIONS_PER_USER_MAX live ones. */
int db_session_add(struct db *db, const char *user, int64_t now, const struct db_session_policy *p,
                   char *id_out, size_t id_cap, char *csrf_out, size_t csrf_cap);
/* Use a session: its secret and its CSRF token must both match. AL_E_NOENT
 * if it is unknown, signed out or malformed; AL_E_EXPIRED if it is past
 * its lifetime or idle limit (then deleted); AL_E_PERM if the CSRF token
 * is missing (NULL) or wrong (the session stays). On success out is
 * filled and last_seen becomes now. */
int db_session_use(struct db *db, const char *id, const char *csrf, int64_t now,
                   const struct db_session_policy *p, struct db_session *out);
/* A session's handle: what its row is keyed by (hex SHA-256 of the
 * secret, DB_SESSION_HANDLE_LEN characters and a NUL into out, cap > that),
 * so that a caller may follow a session without keeping its secret.
 * AL_E_NOENT for a malformed secret. */
int db_session_handle(struct db *db, const char *id, char *out, size_t cap);
/* Whether the session of a handle still lives at now, without using it (no
 * CSRF token asked, last_seen unchanged): AL_OK (out filled), AL_E_NOENT
 * (signed out, its user removed, or never there), AL_E_EXPIRED (past its
 * lifetime or idle limit: then deleted), AL_E_INVAL (not a handle). */
int db_session_live(struct db *db, const char *handle, int64_t now,
                    const struct db_session_policy *p, struct db_session *out);
/* Sign-out: delete it (AL_E_NOENT if it is not there). */
int db_session_remove(struct db *db, const char *id);
/* Delete every session expired at now. */
int db_session_expire(struct db *db, int64_t now, const struct db_session_policy *p);

/* Proxy credentials, by the hex SHA-256 of the credential (lowercase,
 * DB_PROXY_HASH_HEX characters; the proxy mints and hashes them).
 * db_proxy_add binds one to a live (opening or running) terminal and the n
 * upstreams it opens (names as above, no duplicates): AL_E_NOENT if there
 * is no such terminal, AL_E_STATE if it has ended, AL_E_EXISTS if the hash
 * is stored already. */
int db_proxy_add(struct db *db, const char *hash_hex, const char *terminal_id,
                 const char *const *upstreams, size_t n);
/* The terminal (into terminal_out, cap > DB_NAME_MAX) whose credential
 * this is, when it opens `upstream`: AL_E_NOENT when the hash is unknown,
 * revoked, bound to a terminal that is no longer opening or running, or
 * does not open that upstream; AL_E_INVAL for a malformed hash or name. */
int db_proxy_lookup(struct db *db, const char *hash_hex, const char *upstream, char *terminal_out,
                    size_t cap);
/* Revoke every credential of the terminal (none is fine). */
int db_proxy_revoke_terminal(struct db *db, const char *terminal_id);
/* Revoke every credential whose terminal is no longer opening or running
 * (airlockd at start: a terminal that ended while it was down). */
int db_proxy_revoke_ended(struct db *db);
/* The terminal's newest credential (never the credential itself):
 * AL_E_NOENT when it has none. */
int db_proxy_of_terminal(struct db *db, const char *terminal_id, struct db_proxy *out);

/* Audit. at: Unix ms (0: now); actor: a user name or "system"; target may
 * be NULL or ""; detail_json a JSON object (NULL: {}). */
int db_audit_add(struct db *db, int64_t at, const char *actor, const char *action,
                 const char *target, const char *detail_json);
/* One row of db_audit_add_batch: db_audit_add's arguments (strings
 * borrowed for the call). */
struct db_audit_row {
    int64_t at; /* Unix ms; 0: now */
    const char *actor, *action, *target, *detail_json;
};
/* n rows (0..DB_AUDIT_BATCH_MAX) in one transaction, in order (their ids
 * grow with their index): every row is checked first, and then either all
 * are stored or none. A row db_audit_add would refuse fails the whole
 * batch with that code and its index in the message. */
int db_audit_add_batch(struct db *db, const struct db_audit_row *rows, size_t n);
int db_audit_query(struct db *db, const struct db_audit_filter *f, db_audit_cb cb, void *ctx);
/* Retention: remove the rows older than before_at (Unix ms; 0: none by
 * age), then all but the newest keep_rows (0: none by count). The audit
 * log of an exposed server grows with what peers send: this bounds it by
 * age and by size. */
int db_audit_prune(struct db *db, int64_t before_at, uint64_t keep_rows);

/* Replicas (schema 7): the processes serving this database. Every time is
 * the database's own clock (PostgreSQL's now(), SQLite's 'now'), so that
 * replicas on hosts whose clocks differ agree on who is gone.
 * db_replica_new_id writes a fresh random id ("r-" + 24 hex) to out
 * (cap > DB_REPLICA_ID_LEN). */
int db_replica_new_id(struct db *db, char *out, size_t cap);
/* A ws:// or wss:// URL of 1..DB_REPLICA_ADDR_MAX printable characters
 * without spaces: what a replica's address must be. */
bool db_replica_address_valid(const char *s);
/* A heartbeat: the replica's row made (started_at = beat_at = now) or its
 * beat_at moved to now (never backwards) and its address updated. */
int db_replica_beat(struct db *db, const char *id, const char *address);
/* A clean stop: stopped_at = now (AL_E_NOENT when there is no such row). */
int db_replica_stop(struct db *db, const char *id);
/* Every replica (at most DB_REPLICAS_LIST_MAX, oldest start first), alive
 * when not stopped and beat within stale_ms (1..) of the database's now. */
int db_replica_list(struct db *db, int64_t stale_ms, db_replica_cb cb, void *ctx);
/* Delete the rows whose beat is older than keep_ms (1..) before now. */
int db_replica_prune(struct db *db, int64_t keep_ms);
/* Publish the replica's public keys (schema 11): jwks, the text of a JWKS
 * without control characters (compact JSON), 1..DB_REPLICA_JWKS_MAX
 * bytes; the data layer does not parse it (the verifier does, strictly).
 * AL_E_NOENT when there is no such row. */
int db_replica_set_jwks(struct db *db, const char *id, const char *jwks);
/* Every replica's published keys (at most DB_REPLICAS_LIST_MAX rows, alive
 * or not, oldest start first; rows without keys skipped): cb once per
 * replica with its id and its JWKS text, valid during the call. */
int db_replica_jwks_list(struct db *db, db_replica_jwks_cb cb, void *ctx);

/* Leases (schema 9): which replica owns a sandbox's runner link, with a
 * fencing token (the fence) that grows at every change of owner. Times are
 * the database's clock, lengths in ms (1..). All take effect in one
 * statement each, so that two replicas racing for a lease cannot both win.
 *
 * db_lease_take: the sandbox's lease for replica_id, if it is free, expired,
 * held by a replica not alive (stopped, or no beat within stale_ms; or no
 * row), or held by replica_id already; a new owner bumps the fence. The
 * fence into *fence. AL_E_STATE while another live replica holds it,
 * AL_E_NOENT without such a sandbox. */
int db_lease_take(struct db *db, const char *sandbox_id, const char *replica_id, int64_t stale_ms,
                  int64_t lease_ms, int64_t *fence);
/* db_lease_take_free: every lease db_lease_take would give replica_id
 * that it does not hold yet, in one statement; cb once per lease taken,
 * with its new fence. */
int db_lease_take_free(struct db *db, const char *replica_id, int64_t stale_ms, int64_t lease_ms,
                       db_lease_cb cb, void *ctx);
/* db_lease_move: the lease for replica_id whoever holds it (a runner
 * dialed this replica: the old owner is fenced off); the fence bumped
 * unless replica_id held it already. AL_E_NOENT without such a sandbox. */
int db_lease_move(struct db *db, const char *sandbox_id, const char *replica_id, int64_t lease_ms,
                  int64_t *fence);
/* Renew every lease replica_id holds (one statement), then cb once per
 * lease it still holds, with its fence: a sandbox missing from the calls
 * was taken by another. */
int db_lease_renew(struct db *db, const char *replica_id, int64_t lease_ms, db_lease_cb cb,
                   void *ctx);
/* Free every lease replica_id holds (a clean stop); the fences stay. */
int db_lease_release(struct db *db, const char *replica_id);

/* Runner keys (schema 10): a sandbox's pinned runner key, as the hex
 * SHA-256 of the key (DB_RUNNER_KEY_HEX lowercase hex digits).
 * db_runner_key_pin: hash_hex pinned unless a key is pinned already, in one
 * statement (two replicas racing pin one key); the pin now in force, new
 * or old, into pinned (cap > DB_RUNNER_KEY_HEX). AL_E_NOENT without such
 * a sandbox. */
int db_runner_key_pin(struct db *db, const char *sandbox_id, const char *hash_hex, char *pinned,
                      size_t cap);
/* db_runner_key_set: the pin replaced by hash_hex (a local runner started
 * with a fresh key), or forgotten (hash_hex NULL: a new enrollment), made
 * only while the sandbox's fence is still `fence` (AL_E_PERM once it moved
 * on; DB_NO_FENCE: not fenced). AL_E_NOENT without such a sandbox. */
int db_runner_key_set(struct db *db, const char *sandbox_id, const char *hash_hex, int64_t fence);

/* Fenced writes: the same as the calls without _fenced, made only while
 * the sandbox's fence is still `fence` (checked by the database in the
 * same statement); AL_E_PERM, with nothing written, once it moved on (the
 * sandbox has another owner). DB_NO_FENCE: not fenced. */
int db_sandbox_set_link_fenced(struct db *db, const char *id, bool up, int64_t since,
                               int64_t rtt_us, int64_t fence);
int db_terminal_set_state_fenced(struct db *db, const char *id, enum db_term_state state,
                                 int64_t fence);
int db_terminal_set_exit_fenced(struct db *db, const char *id, int code, int signo, int64_t fence);
int db_terminal_set_offsets_fenced(struct db *db, const char *id, const struct db_term_offsets *o,
                                   int64_t fence);
/* An audit row about sandbox_id (or one of its terminals). */
int db_audit_add_fenced(struct db *db, const char *sandbox_id, int64_t fence, int64_t at,
                        const char *actor, const char *action, const char *target,
                        const char *detail_json);

#endif
