/*
 * signer: the one process of `airlockd serve` that holds the private key.
 *
 * Control plane only (al_control). The serving process (HTTP, WebSocket,
 * JSON: untrusted input) never loads signing-key.pem: at start it forks
 * and execs `airlockd signer --fd 3 --data DIR` with one end of a
 * SOCK_SEQPACKET socketpair, and asks it for tokens of a few fixed shapes.
 * The signer loads (or, on first start, creates) the key, refuses any
 * request outside its table of shapes, reads its own clock, and logs every
 * mint. Threat model and the test that proves it: docs/security.md.
 *
 * Data model
 *   Shapes (enum signer_shape): a request names one; the shape fixes the
 *   scope and the pattern of aud and sub, and bounds the lifetime:
 *     shape          scope           aud                sub          ttl max
 *     RUNNER         runner:connect  a sandbox id       "airlockd"   600 s
 *     ENROLL         runner:connect  a sandbox id       a user name  3600 s
 * (Web sessions are random secrets kept hashed in the database: nothing to
 * sign, so no shape.)
 *   (ids and names as db_name_valid: [a-z0-9._-], 1..64, first alnum).
 *
 *   Wire format, one message per SEQPACKET datagram, integers big-endian,
 *   every length explicit and the total checked exactly:
 *     request  u8 version (1), u8 op, u32 id, then
 *                HELLO: nothing
 *                MINT:  u8 shape, u32 ttl, u8 aud_len, aud, u8 sub_len, sub
 *              at most SIGNER_REQ_MAX bytes
 *     answer   u8 version, u8 op, u32 id (the request's), u8 status
 *              (0, or the negated AL_E_* code), then
 *                error: u8 len, reason (printable ASCII)
 *                HELLO: u8 len, kid
 *                MINT:  u8 len, kid, u8 len, jti, u64 exp, u16 len, token
 *              at most SIGNER_RESP_MAX bytes
 *   An undecodable request is answered with an error (id 0 when even the
 *   header is short) and the signer keeps serving.
 *
 *   struct signer (opaque, the serving side): the socket, the child's pid,
 *   the kid it announced at HELLO (pinned: a restarted signer must load the
 *   same key), the next request id. Calls are synchronous and bounded by
 *   a timeout (signing takes microseconds).
 *
 * Failure: when the signer does not answer in time, answers nonsense or
 * has died, the request fails (AL_E_IO/AL_E_TIMEOUT/AL_E_PROTO), the child
 * is killed and reaped, and a fresh signer is started and asked once more;
 * at most one restart per SIGNER_RESTART_MIN_MS, so a signer that keeps
 * dying costs errors, never a busy loop or a hang.
 */
#ifndef AL_SIGNER_H
#define AL_SIGNER_H

#include "keys.h"
#include "token.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SIGNER_RUNNER_SUB "airlockd" /* who runner:connect tokens speak for */
#define SIGNER_RUNNER_SCOPE "runner:connect"
#define SIGNER_HOP_SCOPE "replica:attach"
#define SIGNER_FWD_SCOPE "replica:api"

enum {
    SIGNER_VERSION = 1,
    SIGNER_CHILD_FD = 3,                                   /* the socket's number in the signer */
    SIGNER_STR_MAX = 255,                                  /* aud, sub on the wire (u8 length) */
    SIGNER_REQ_MAX = 6 + 1 + 4 + 2 * (1 + SIGNER_STR_MAX), /* 523 bytes */
    SIGNER_REASON_MAX = 200,                               /* an error's reason on the wire */
    SIGNER_RESP_MAX = 7 + 1 + KEYS_KID_LEN + 1 + SIGNER_STR_MAX + 8 + 2 + TOK_MAX_TOKEN,
    SIGNER_RUNNER_TTL_MAX = 600,     /* s: relay's runner tokens, refreshed in band */
    SIGNER_ENROLL_TTL_MAX = 3600,    /* s: a reverse runner's enrollment token */
    SIGNER_HOP_TTL_MAX = 60,         /* s: a replica's token for a client it relays */
    SIGNER_TIMEOUT_MS = 3000,        /* an answer to one request */
    SIGNER_START_TIMEOUT_MS = 10000, /* exec, load (or create) the key, HELLO */
    SIGNER_STOP_TIMEOUT_MS = 2000,   /* exit after EOF, then SIGKILL */
    SIGNER_RESTART_MIN_MS = 1000,    /* between two restarts */
};

enum signer_op { SIGNER_OP_HELLO = 1, SIGNER_OP_MINT = 2 };
/* 3 was the web session's, retired: never reused. SIGNER_SHAPE_HOP: a
 * replica vouching for a client it relays to the owner of the client's
 * terminal (docs/scale-out.md, "Clients on any replica"): aud the owner's
 * replica id, sub the user's name. SIGNER_SHAPE_FWD: the same for an
 * action it forwards to the owner of the action's sandbox ("Actions at
 * any replica"), with a scope of its own. */
enum signer_shape {
    SIGNER_SHAPE_RUNNER = 1,
    SIGNER_SHAPE_ENROLL = 2,
    SIGNER_SHAPE_HOP = 4,
    SIGNER_SHAPE_FWD = 5,
};

/* ---- the wire (pure: no I/O, no clock) ------------------------------------ */

struct signer_req {
    uint8_t op;    /* enum signer_op */
    uint32_t id;   /* echoed in the answer */
    uint8_t shape; /* MINT: enum signer_shape */
    uint32_t ttl;  /* MINT: seconds */
    char aud[SIGNER_STR_MAX + 1];
    char sub[SIGNER_STR_MAX + 1];
};

struct signer_resp {
    uint8_t op;
    uint32_t id;
    int status;                         /* AL_OK or AL_E_* */
    char reason[SIGNER_REASON_MAX + 1]; /* status != AL_OK */
    char kid[KEYS_KID_LEN + 1];         /* HELLO, MINT */
    char jti[SIGNER_STR_MAX + 1];       /* MINT */
    int64_t exp;                        /* MINT: Unix seconds */
    char token[TOK_MAX_TOKEN + 1];      /* MINT */
    size_t token_len;
};

/* Encode into buf (cap >= SIGNER_REQ_MAX / SIGNER_RESP_MAX suffices);
 * *len is the message size. AL_E_TOOBIG when a string does not fit. */
int signer_req_encode(const struct signer_req *q, uint8_t *buf, size_t cap, size_t *len);
int signer_resp_encode(const struct signer_resp *r, uint8_t *buf, size_t cap, size_t *len);
/* Strict decoding: version, op, every length, no NUL or control byte in a
 * string, nothing left over. AL_E_VERSION, AL_E_TYPE, AL_E_TOOBIG or
 * AL_E_FORMAT, with a reason. */
int signer_req_parse(const uint8_t *buf, size_t len, struct signer_req *q, char *why, size_t cap);
int signer_resp_parse(const uint8_t *buf, size_t len, struct signer_resp *r, char *why, size_t cap);
/* Whether the table allows this MINT: AL_OK, or AL_E_PERM with a reason. */
int signer_shape_check(const struct signer_req *q, char *why, size_t cap);
/* "runner", "enroll", "session"; "?" for others. */
const char *signer_shape_name(unsigned shape);

/* ---- the signer process ------------------------------------------------------ */

/* Answer requests on fd with key k until EOF (AL_OK) or a socket error.
 * now_fn NULL: time(NULL). k NULL: every MINT fails with load_err. */
int signer_serve(int fd, const struct keys_signing *k, const char *load_err, int log_level,
                 int log_format);
/* `airlockd signer`: harden the process (not dumpable, dies with its
 * parent, SIGINT ignored), load or create DATA/signing-key.pem, serve fd.
 * Returns the exit status. */
int signer_main(int fd, const char *data_dir, int log_level, int log_format);

/* ---- the serving side -------------------------------------------------------- */

struct signer;

struct signer_config {
    const char *exe;      /* the airlockd binary; NULL: /proc/self/exe */
    const char *data_dir; /* where signing-key.pem is */
    int log_level;        /* passed to the signer */
    int log_format;       /* enum al_log_format, likewise */
};

/* Fork and exec the signer, wait for its HELLO (the kid). On failure the
 * signer's own reason (say, the key file's mode) is in err. */
int signer_start(const struct signer_config *cfg, struct signer **out, char *err, size_t cap);

struct signer_mint {
    enum signer_shape shape;
    const char *aud;
    const char *sub;
    uint32_t ttl;
};

/* Ask for one token; restarts a failed signer (see above). The answer is
 * in out (token, kid, jti, exp). */
int signer_mint(struct signer *s, const struct signer_mint *m, struct signer_resp *out, char *why,
                size_t cap);
const char *signer_kid(const struct signer *s);
pid_t signer_pid(const struct signer *s);
/* Close the socket, let the signer exit (SIGKILL after the timeout), reap. */
void signer_stop(struct signer *s);

#endif
