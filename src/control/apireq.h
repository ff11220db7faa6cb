/*
 * apireq: the JSON request bodies of airlockd's HTTP API, parsed and
 * checked. Bodies come from the network (untrusted). Control plane only
 * (al_control). Pure: no I/O, no clock, no global state.
 *
 * Rules common to every body:
 *   - at most APIREQ_MAX_BODY bytes (checked before parsing: AL_E_TOOBIG);
 *   - one JSON value, UTF-8, nothing but whitespace after it; a JSON object
 *     (anything else, e.g. an array or a string, is refused);
 *   - no member twice (duplicate keys are refused), no member not listed
 *     below (the first unknown one is named), JSON null is never accepted
 *     in place of an absent member;
 *   - strings never contain a NUL ("\u0000" is refused where it appears);
 *   - integers are JSON integers (80, not 80.0 or "80").
 *
 * POST /v1/terminals  (apireq_terminal)
 *   {"sandbox": "box1",                 required: a sandbox id (db_name_valid:
 *                                         [a-z0-9._-], 1..DB_NAME_MAX, first a
 *                                         letter or digit)
 *    "argv": ["bash", "-l"],            required: 1..AL_MAX_ARGV strings, argv[0]
 *                                         1..AL_MAX_STR bytes, the others
 *                                         0..AL_MAX_STR; the array as compact
 *                                         JSON at most DB_ARGV_JSON_MAX bytes
 *    "cwd": "/work",                    optional, default "" (the runner's
 *                                         default): 0..AL_MAX_STR bytes, no
 *                                         control character (C0, DEL, C1)
 *    "env": {"LANG": "C.UTF-8"},        optional, default {}: 0..AL_MAX_ENV
 *                                         members, names [A-Za-z_][A-Za-z0-9_]*,
 *                                         values strings, each "NAME=value" at
 *                                         most AL_MAX_STR bytes; the object as
 *                                         compact JSON with sorted keys at most
 *                                         DB_ENV_JSON_MAX bytes
 *    "cols": 80, "rows": 24,            optional, defaults APIREQ_DEFAULT_COLS x
 *                                         APIREQ_DEFAULT_ROWS: integers
 *                                         1..AL_MAX_COLS, 1..AL_MAX_ROWS
 *    "mode": "pty",                     optional, default "pty": "pty" or "pipes"
 *    "term": "xterm-256color",          optional, default APIREQ_DEFAULT_TERM:
 *                                         1..AL_MAX_TERM printable ASCII
 *                                         characters, no space
 *    "record_input": true,              optional, default true: a boolean; it
 *                                         can only narrow the sandbox's own
 *                                         record_input (off unless an admin set
 *                                         it), never turn input recording on
 *    "proxy": ["anthropic"]}            optional, default []: the credential
 *                                         proxy's upstreams the terminal may
 *                                         call (docs/proxy.md): 0..
 *                                         APIREQ_PROXY_MAX names, each 1..
 *                                         DB_PROXY_NAME_MAX of [a-z0-9_-], none
 *                                         twice (whether airlockd has them is
 *                                         the relay's check, not this one's)
 *
 * POST /v1/sandboxes  (apireq_sandbox, admin)
 *   {"id": "box1",                      required: a sandbox id (as "sandbox")
 *    "kind": "static",                  required: "local", "static" or "reverse"
 *    "url": "wss://host:7443/airlock",  required for "static", refused for the
 *                                         others: "ws://" or "wss://", then at
 *                                         least one character, all printable
 *                                         ASCII without space; at most
 *                                         DB_SANDBOX_URL_MAX bytes in all
 *    "record_input": false,             optional, default false: whether its
 *                                         terminals' recordings keep the
 *                                         writer's keystrokes ("i" events)
 *    "network": "none"}                 optional, local only (refused for the
 *                                         others, whose runners airlockd does
 *                                         not start): "host" or "none" (its
 *                                         agents get loopback only); absent,
 *                                         the server's --sandbox-network
 *
 * A resize body (apireq_resize; no HTTP route takes it yet: terminals
 * are resized by their writer's RESIZE frame)
 *   {"cols": 120, "rows": 40}           both required: 1..AL_MAX_COLS,
 *                                         1..AL_MAX_ROWS
 *
 * POST /v1/terminals/{id}/kill  (apireq_signal)
 *   {"signal": "TERM"}                  optional, default "TERM": one of HUP INT
 *                                         QUIT KILL USR1 USR2 TERM CONT STOP TSTP
 *                                         WINCH (upper case, no "SIG" prefix),
 *                                         the signals the protocol carries
 *                                         (fr_signal_ok). An empty body (0 bytes
 *                                         or only whitespace) means {}.
 *
 * POST /v1/sandboxes/{id}/enroll  (apireq_enroll, admin)
 *   {"ttl": 3600}                       optional, default APIREQ_ENROLL_TTL_DEFAULT:
 *                                         the enrollment token's lifetime in
 *                                         seconds, APIREQ_ENROLL_TTL_MIN..
 *                                         APIREQ_ENROLL_TTL_MAX. An empty body
 *                                         means {}.
 *
 * Errors: AL_OK, or AL_E_INVAL for a bad body, AL_E_TOOBIG for a size or
 * count over its limit, AL_E_NOMEM when memory runs out. The reason goes to
 * err (cap bytes, NUL-terminated, truncated to fit; NULL or cap 0: none) in
 * one line that names the field, e.g.
 *   "argv": must be a non-empty array of strings
 *   "env"."1X": name must match [A-Za-z_][A-Za-z0-9_]*
 * Text from the body quoted in a reason is cut to APIREQ_SHOW_MAX bytes and
 * anything but printable ASCII in it is shown as '?'. On success err is "".
 * APIREQ_ERR_MAX bytes hold any reason whole.
 */
#ifndef APIREQ_H
#define APIREQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "al_limits.h"
#include "db.h"

#define APIREQ_DEFAULT_TERM "xterm-256color"

enum {
    APIREQ_MAX_BODY = 64 * 1024, /* bytes in a request body */
    APIREQ_ERR_MAX = 256,        /* err capacity that holds any reason */
    APIREQ_SHOW_MAX = 64,        /* bytes of body text quoted in a reason */
    APIREQ_DEFAULT_COLS = 80,
    APIREQ_DEFAULT_ROWS = 24,
    APIREQ_DEFAULT_SIGNAL = 15, /* TERM (Linux numbering, as on the wire) */
    APIREQ_ENROLL_TTL_MIN = 5,  /* seconds an enrollment token lives, bounds */
    APIREQ_ENROLL_TTL_MAX = 86400,
    APIREQ_ENROLL_TTL_DEFAULT = 3600,
    APIREQ_PROXY_MAX = DB_PROXY_UPSTREAMS_MAX, /* upstreams in "proxy" */
};

/*
 * A checked POST /v1/terminals request. It owns every pointer in it (free
 * with apireq_terminal_free). Strings are NUL-terminated and hold no other
 * NUL. argv_json/env_json are what struct db_terminal_spec takes; argv/env
 * are the same strings ready for an OPEN frame (struct fr_open), in the same
 * order as the JSON texts (env sorted by name, byte order).
 */
struct apireq_terminal {
    char sandbox[DB_NAME_MAX + 1];
    char *argv_json; /* compact JSON array, e.g. ["bash","-l"] */
    char *env_json;  /* compact JSON object, keys sorted, e.g. {"A":"1"}; "{}" */
    char *cwd;       /* "" when absent */
    size_t argc;     /* 1..AL_MAX_ARGV */
    char **argv;     /* argc strings, then NULL */
    size_t envc;     /* 0..AL_MAX_ENV */
    char **env;      /* envc "NAME=value" strings, then NULL */
    uint16_t cols, rows;
    enum db_term_mode mode;
    char term[AL_MAX_TERM + 1];
    bool record_input;
    size_t nproxy; /* 0..APIREQ_PROXY_MAX, in the order given */
    char proxy[APIREQ_PROXY_MAX][DB_PROXY_NAME_MAX + 1];
};

/* A checked POST /v1/sandboxes request (nothing to free). */
struct apireq_sandbox {
    char id[DB_NAME_MAX + 1];
    enum db_sandbox_kind kind;
    char url[DB_SANDBOX_URL_MAX + 1]; /* "" unless kind is static or aca */
    bool record_input;
    enum db_sandbox_network network;    /* DB_NETWORK_DEFAULT when absent */
    char platform[DB_PLATFORM_MAX + 1]; /* "" unless kind is aca */
};

/* Parse body[0..len). *out is overwritten, not freed first; on failure it is
 * left zeroed (holding nothing), so apireq_terminal_free is always safe. */
int apireq_terminal(const char *body, size_t len, struct apireq_terminal *out, char *err,
                    size_t cap);
/* Free what t holds and zero it; NULL, a zeroed struct and a second call
 * are fine. Allocations use jansson's allocator (json_get_alloc_funcs). */
void apireq_terminal_free(struct apireq_terminal *t);

/* On failure *out is zeroed. */
int apireq_sandbox(const char *body, size_t len, struct apireq_sandbox *out, char *err, size_t cap);
/* On failure *cols and *rows are left as they were. */
int apireq_resize(const char *body, size_t len, uint16_t *cols, uint16_t *rows, char *err,
                  size_t cap);
/* *signo: the Linux signal number the protocol uses (fr_signal_ok); left as
 * it was on failure. */
int apireq_signal(const char *body, size_t len, unsigned *signo, char *err, size_t cap);
/* *ttl_s: seconds; left as it was on failure. */
int apireq_enroll(const char *body, size_t len, unsigned *ttl_s, char *err, size_t cap);

#endif
