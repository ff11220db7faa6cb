/*
 * signer: the key-holding process and its client. See signer.h.
 *
 * Data model
 *   sg_shapes[]   the table of token shapes the signer mints: scope, the
 *                 pattern aud and sub must match (a literal, or a name as
 *                 db_name_valid says), the longest lifetime. Nothing else is
 *                 ever signed: the serving process chooses only a row, the
 *                 strings the row's patterns accept and a ttl under its bound;
 *                 iss, iat/nbf (the signer's clock) and the jti are the
 *                 signer's.
 *   struct sg_rd  a cursor over one received message (bytes, length, offset)
 *                 for the strict decoders; struct sg_wr the same for writing.
 *   struct signer the serving side's handle: the socket (SOCK_SEQPACKET, one
 *                 message per datagram, so a message is never split or
 *                 merged), the child's pid, the pinned kid, the next request
 *                 id, when the signer was last started (monotonic ms).
 */
#include "signer.h"

#include "al_err.h"
#include "al_log.h"
#include "b64url.h"
#include "db.h"
#include "tok_sign.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SG_PROG "airlockd-signer"
#define SG_SERVER "airlockd"
#define SG_SELF_EXE "/proc/self/exe"

enum {
    SG_HDR_REQ = 6,       /* version, op, id */
    SG_HDR_RESP = 7,      /* version, op, id, status */
    SG_STATUS_MAX = 127,  /* a negated AL_E_* code fits a byte */
    SG_STOP_POLL_MS = 10, /* while waiting for the signer to exit */
    SG_JTI_BYTES = TOK_SIGN_JTI_BYTES,
    SG_LEVEL_TEXT = 8, /* "--log-level" value */
};

/* ---- the table of shapes ------------------------------------------------------ */

enum sg_pat { SG_PAT_LITERAL, SG_PAT_NAME };

struct sg_shape {
    const char *name;    /* in logs and audits */
    const char *scope;   /* exactly this scope list */
    const char *aud_lit; /* aud when aud_pat is SG_PAT_LITERAL */
    const char *sub_lit;
    enum signer_shape shape;
    enum sg_pat aud_pat;
    enum sg_pat sub_pat;
    uint32_t ttl_max; /* seconds */
};

static const struct sg_shape sg_shapes[] = {
    {.shape = SIGNER_SHAPE_RUNNER,
     .name = "runner",
     .scope = SIGNER_RUNNER_SCOPE,
     .aud_pat = SG_PAT_NAME,
     .sub_pat = SG_PAT_LITERAL,
     .sub_lit = SIGNER_RUNNER_SUB,
     .ttl_max = SIGNER_RUNNER_TTL_MAX},
    {.shape = SIGNER_SHAPE_ENROLL,
     .name = "enroll",
     .scope = SIGNER_RUNNER_SCOPE,
     .aud_pat = SG_PAT_NAME,
     .sub_pat = SG_PAT_NAME,
     .ttl_max = SIGNER_ENROLL_TTL_MAX},
    {.shape = SIGNER_SHAPE_HOP,
     .name = "hop",
     .scope = SIGNER_HOP_SCOPE,
     .aud_pat = SG_PAT_NAME,
     .sub_pat = SG_PAT_NAME,
     .ttl_max = SIGNER_HOP_TTL_MAX},
    {.shape = SIGNER_SHAPE_FWD,
     .name = "fwd",
     .scope = SIGNER_FWD_SCOPE,
     .aud_pat = SG_PAT_NAME,
     .sub_pat = SG_PAT_NAME,
     .ttl_max = SIGNER_HOP_TTL_MAX},
};
enum { SG_NSHAPES = sizeof sg_shapes / sizeof sg_shapes[0] };

_Static_assert((int)SIGNER_ENROLL_TTL_MAX <= (int)TOK_SIGN_TTL_MAX,
               "the minter's bound is the outer one");
_Static_assert((int)SIGNER_RUNNER_TTL_MAX <= (int)TOK_SIGN_TTL_MAX,
               "the minter's bound is the outer one");
_Static_assert((int)SIGNER_STR_MAX <= (int)TOK_MAX_CLAIM_STR, "a claim the verifier takes");
_Static_assert(B64U_ENC_LEN(SG_JTI_BYTES) <= SIGNER_STR_MAX, "a jti fits the wire");

static const struct sg_shape *sg_shape_of(unsigned shape)
{
    for (size_t i = 0; i < SG_NSHAPES; i++)
        if ((unsigned)sg_shapes[i].shape == shape)
            return &sg_shapes[i];
    return NULL;
}

const char *signer_shape_name(unsigned shape)
{
    const struct sg_shape *s = sg_shape_of(shape);
    return s ? s->name : "?";
}

static bool sg_pat_ok(enum sg_pat pat, const char *lit, const char *s)
{
    return pat == SG_PAT_LITERAL ? strcmp(s, lit) == 0 : db_name_valid(s);
}

int signer_shape_check(const struct signer_req *q, char *why, size_t cap)
{
    if (!q || q->op != SIGNER_OP_MINT) {
        al_errf(why, cap, "not a mint request");
        return AL_E_PERM;
    }
    const struct sg_shape *s = sg_shape_of(q->shape);
    if (!s) {
        al_errf(why, cap, "shape %u is not in the table", (unsigned)q->shape);
        return AL_E_PERM;
    }
    if (!sg_pat_ok(s->aud_pat, s->aud_lit, q->aud)) {
        al_errf(why, cap, "%s: aud must be %s", s->name,
                s->aud_pat == SG_PAT_LITERAL ? s->aud_lit : "a sandbox id");
        return AL_E_PERM;
    }
    if (!sg_pat_ok(s->sub_pat, s->sub_lit, q->sub)) {
        al_errf(why, cap, "%s: sub must be %s", s->name,
                s->sub_pat == SG_PAT_LITERAL ? s->sub_lit : "a user name");
        return AL_E_PERM;
    }
    if (q->ttl < 1 || q->ttl > s->ttl_max) {
        al_errf(why, cap, "%s: ttl must be 1 to %u seconds", s->name, (unsigned)s->ttl_max);
        return AL_E_PERM;
    }
    return AL_OK;
}

/* ---- the wire ----------------------------------------------------------------- */

struct sg_wr {
    uint8_t *p;
    size_t cap, off;
    int err; /* AL_E_TOOBIG once anything did not fit */
};

static void sg_put(struct sg_wr *w, const void *src, size_t n)
{
    if (w->err || n > w->cap - w->off) {
        w->err = AL_E_TOOBIG;
        return;
    }
    memcpy(w->p + w->off, src, n);
    w->off += n;
}

static void sg_put_be(struct sg_wr *w, uint64_t v, unsigned bytes)
{
    uint8_t b[8];
    for (unsigned i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
    sg_put(w, b, bytes);
}

/* A string with a length prefix of len_bytes (1 or 2), at most max bytes. */
static void sg_put_str(struct sg_wr *w, const char *s, size_t max, unsigned len_bytes)
{
    size_t n = strlen(s);
    if (n > max) {
        w->err = AL_E_TOOBIG;
        return;
    }
    sg_put_be(w, n, len_bytes);
    sg_put(w, s, n);
}

struct sg_rd {
    const uint8_t *p;
    size_t len, off;
    int err; /* AL_E_FORMAT once anything was short or bad */
};

static uint64_t sg_get_be(struct sg_rd *r, unsigned bytes)
{
    if (r->err || bytes > r->len - r->off) {
        r->err = AL_E_FORMAT;
        return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v = v << 8 | r->p[r->off + i];
    r->off += bytes;
    return v;
}

/* A length-prefixed string into out (cap > max): 1..max bytes of printable
 * ASCII other than space (min 0 allows the empty string). */
static void sg_get_str(struct sg_rd *r, char *out, size_t min, size_t max, unsigned len_bytes,
                       bool spaces)
{
    out[0] = '\0';
    size_t n = (size_t)sg_get_be(r, len_bytes);
    if (r->err || n < min || n > max || n > r->len - r->off) {
        r->err = AL_E_FORMAT;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t c = r->p[r->off + i];
        if (c < (spaces ? 0x20 : 0x21) || c > 0x7e) {
            r->err = AL_E_FORMAT;
            return;
        }
    }
    memcpy(out, r->p + r->off, n);
    out[n] = '\0';
    r->off += n;
}

int signer_req_encode(const struct signer_req *q, uint8_t *buf, size_t cap, size_t *len)
{
    if (!q || !buf || !len)
        return AL_E_INVAL;
    struct sg_wr w = {buf, cap, 0, AL_OK};
    sg_put_be(&w, SIGNER_VERSION, 1);
    sg_put_be(&w, q->op, 1);
    sg_put_be(&w, q->id, 4);
    if (q->op == SIGNER_OP_MINT) {
        sg_put_be(&w, q->shape, 1);
        sg_put_be(&w, q->ttl, 4);
        sg_put_str(&w, q->aud, SIGNER_STR_MAX, 1);
        sg_put_str(&w, q->sub, SIGNER_STR_MAX, 1);
    }
    *len = w.err ? 0 : w.off;
    return w.err;
}

int signer_req_parse(const uint8_t *buf, size_t len, struct signer_req *q, char *why, size_t cap)
{
    if (!buf || !q)
        return AL_E_INVAL;
    memset(q, 0, sizeof *q);
    if (len > SIGNER_REQ_MAX) {
        al_errf(why, cap, "request of %zu bytes, more than %d", len, SIGNER_REQ_MAX);
        return AL_E_TOOBIG;
    }
    struct sg_rd r = {buf, len, 0, AL_OK};
    unsigned version = (unsigned)sg_get_be(&r, 1);
    q->op = (uint8_t)sg_get_be(&r, 1);
    q->id = (uint32_t)sg_get_be(&r, 4);
    if (r.err) {
        q->op = 0;
        q->id = 0;
        al_errf(why, cap, "request shorter than its header");
        return AL_E_FORMAT;
    }
    if (version != SIGNER_VERSION) {
        q->op = 0; /* answered as op 0: the client decodes no other unknown op */
        al_errf(why, cap, "version %u, this signer speaks %d", version, SIGNER_VERSION);
        return AL_E_VERSION;
    }
    if (q->op == SIGNER_OP_MINT) {
        q->shape = (uint8_t)sg_get_be(&r, 1);
        q->ttl = (uint32_t)sg_get_be(&r, 4);
        sg_get_str(&r, q->aud, 1, SIGNER_STR_MAX, 1, false);
        sg_get_str(&r, q->sub, 1, SIGNER_STR_MAX, 1, false);
    } else if (q->op != SIGNER_OP_HELLO) {
        al_errf(why, cap, "unknown op %u", (unsigned)q->op);
        q->op = 0;
        return AL_E_TYPE;
    }
    if (r.err || r.off != r.len) {
        al_errf(why, cap, "malformed %s request", q->op == SIGNER_OP_MINT ? "mint" : "hello");
        return AL_E_FORMAT;
    }
    return AL_OK;
}

int signer_resp_encode(const struct signer_resp *a, uint8_t *buf, size_t cap, size_t *len)
{
    if (!a || !buf || !len || a->status > 0 || a->status < -SG_STATUS_MAX)
        return AL_E_INVAL;
    struct sg_wr w = {buf, cap, 0, AL_OK};
    sg_put_be(&w, SIGNER_VERSION, 1);
    sg_put_be(&w, a->op, 1);
    sg_put_be(&w, a->id, 4);
    sg_put_be(&w, (uint64_t)-a->status, 1);
    if (a->status != AL_OK) {
        sg_put_str(&w, a->reason, SIGNER_REASON_MAX, 1);
    } else {
        sg_put_str(&w, a->kid, KEYS_KID_LEN, 1);
        if (a->op == SIGNER_OP_MINT) {
            sg_put_str(&w, a->jti, SIGNER_STR_MAX, 1);
            sg_put_be(&w, (uint64_t)a->exp, 8);
            if (a->token_len != strlen(a->token))
                w.err = AL_E_INVAL;
            sg_put_str(&w, a->token, TOK_MAX_TOKEN, 2);
        }
    }
    *len = w.err ? 0 : w.off;
    return w.err;
}

int signer_resp_parse(const uint8_t *buf, size_t len, struct signer_resp *a, char *why, size_t cap)
{
    if (!buf || !a)
        return AL_E_INVAL;
    memset(a, 0, sizeof *a);
    if (len > SIGNER_RESP_MAX) {
        al_errf(why, cap, "answer of %zu bytes, more than %d", len, SIGNER_RESP_MAX);
        return AL_E_TOOBIG;
    }
    struct sg_rd r = {buf, len, 0, AL_OK};
    unsigned version = (unsigned)sg_get_be(&r, 1);
    a->op = (uint8_t)sg_get_be(&r, 1);
    a->id = (uint32_t)sg_get_be(&r, 4);
    unsigned status = (unsigned)sg_get_be(&r, 1);
    if (r.err) {
        al_errf(why, cap, "answer shorter than its header");
        return AL_E_FORMAT;
    }
    if (version != SIGNER_VERSION) {
        al_errf(why, cap, "answer in version %u, we speak %d", version, SIGNER_VERSION);
        return AL_E_VERSION;
    }
    if (a->op != SIGNER_OP_HELLO && a->op != SIGNER_OP_MINT && !(a->op == 0 && status != 0)) {
        al_errf(why, cap, "answer to unknown op %u", (unsigned)a->op);
        return AL_E_TYPE;
    }
    if (status > SG_STATUS_MAX) {
        al_errf(why, cap, "status %u out of range", status);
        return AL_E_FORMAT;
    }
    a->status = -(int)status;
    if (a->status != AL_OK) {
        sg_get_str(&r, a->reason, 0, SIGNER_REASON_MAX, 1, true);
    } else {
        sg_get_str(&r, a->kid, KEYS_KID_LEN, KEYS_KID_LEN, 1, false);
        if (a->op == SIGNER_OP_MINT) {
            sg_get_str(&r, a->jti, 1, SIGNER_STR_MAX, 1, false);
            uint64_t exp = sg_get_be(&r, 8);
            if (exp > (uint64_t)TOK_TIME_MAX)
                r.err = AL_E_FORMAT;
            a->exp = (int64_t)exp;
            sg_get_str(&r, a->token, 1, TOK_MAX_TOKEN, 2, false);
            a->token_len = strlen(a->token);
        }
    }
    if (r.err || r.off != r.len) {
        memset(a, 0, sizeof *a);
        al_errf(why, cap, "malformed answer");
        return AL_E_FORMAT;
    }
    return AL_OK;
}

/* ---- the signer process ------------------------------------------------------- */

/* One log line from prog (the signer, or the serving side about it). */
__attribute__((format(printf, 5, 6))) static void
sg_log(const char *prog, int format, int max_level, int level, const char *fmt, ...)
{
    if (level > max_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): see tok_reason in token.c
    al_vlog(format, prog, "signer", level, fmt, ap);
    va_end(ap);
}

static int sg_send(int fd, const uint8_t *buf, size_t len)
{
    ssize_t n;
    do
        n = send(fd, buf, len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)len ? AL_OK : AL_E_IO;
}

/* Mint q (already checked against the table) into a. */
static int sg_mint(const struct keys_signing *k, const struct signer_req *q, struct signer_resp *a,
                   char *why, size_t cap)
{
    const struct sg_shape *s = sg_shape_of(q->shape);
    uint8_t rnd[SG_JTI_BYTES];
    if (!s || RAND_bytes(rnd, sizeof rnd) != 1) {
        ERR_clear_error();
        al_errf(why, cap, "no randomness for the jti");
        return AL_E_CRYPTO;
    }
    int rc = b64u_encode(rnd, sizeof rnd, a->jti, sizeof a->jti, NULL);
    if (rc != AL_OK)
        return rc;
    struct tok_sign_req t = {
        .aud = q->aud,
        .sub = q->sub,
        .scope = s->scope,
        .jti = a->jti,
        .now = (int64_t)time(NULL),
        .ttl = q->ttl,
    };
    rc = tok_sign_mint(k, &t, a->token, sizeof a->token, &a->token_len, why, cap);
    if (rc != AL_OK)
        return rc;
    a->exp = t.now + t.ttl;
    (void)snprintf(a->kid, sizeof a->kid, "%s", keys_kid(k));
    return AL_OK;
}

/* One request in buf[0..n) (n > SIGNER_REQ_MAX: too long) into answer a. */
static void sg_answer(const struct keys_signing *k, const char *load_err, int log_level,
                      int log_format, const uint8_t *buf, size_t n, struct signer_resp *a)
{
    struct signer_req q;
    char why[SIGNER_REASON_MAX + 1] = "";
    memset(a, 0, sizeof *a);
    int rc = signer_req_parse(buf, n, &q, why, sizeof why);
    a->op = q.op;
    a->id = q.id;
    if (rc != AL_OK) {
        sg_log(SG_PROG, log_format, log_level, 0, "refused a malformed request: %s", why);
    } else if (!k) {
        rc = AL_E_NOENT;
        (void)snprintf(why, sizeof why, "%s", load_err ? load_err : "no key");
    } else if (q.op == SIGNER_OP_HELLO) {
        (void)snprintf(a->kid, sizeof a->kid, "%s", keys_kid(k));
    } else if ((rc = signer_shape_check(&q, why, sizeof why)) != AL_OK) {
        sg_log(SG_PROG, log_format, log_level, 0, "refused shape=%u aud=%s sub=%s ttl=%u: %s",
               (unsigned)q.shape, q.aud, q.sub, (unsigned)q.ttl, why);
    } else if ((rc = sg_mint(k, &q, a, why, sizeof why)) != AL_OK) {
        sg_log(SG_PROG, log_format, log_level, 0, "minting %s for %s: %s",
               signer_shape_name(q.shape), q.aud, why);
    } else {
        sg_log(SG_PROG, log_format, log_level, 1, "minted %s aud=%s sub=%s ttl=%u jti=%s kid=%s",
               signer_shape_name(q.shape), q.aud, q.sub, (unsigned)q.ttl, a->jti, a->kid);
    }
    if (rc != AL_OK) {
        a->status = rc < -SG_STATUS_MAX ? AL_E_INVAL : rc;
        (void)snprintf(a->reason, sizeof a->reason, "%s", why[0] ? why : al_strerror(rc));
        for (char *p = a->reason; *p; p++)
            if (*p < 0x20 || *p > 0x7e)
                *p = '?';
    }
}

int signer_serve(int fd, const struct keys_signing *k, const char *load_err, int log_level,
                 int log_format)
{
    uint8_t in[SIGNER_REQ_MAX + 1], out[SIGNER_RESP_MAX];
    struct signer_resp *a = malloc(sizeof *a);
    if (!a)
        return AL_E_NOMEM;
    int rc = AL_OK;
    for (;;) {
        /* MSG_TRUNC: the datagram's real length, so an oversized one is
         * refused whole instead of being read as its first bytes */
        ssize_t n = recv(fd, in, sizeof in, MSG_TRUNC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n == 0 ? AL_OK : AL_E_IO;
            break;
        }
        sg_answer(k, load_err, log_level, log_format, in, (size_t)n, a);
        size_t len = 0;
        if (signer_resp_encode(a, out, sizeof out, &len) != AL_OK) {
            memset(a, 0, sizeof *a);
            a->status = AL_E_INVAL;
            (void)snprintf(a->reason, sizeof a->reason, "answer could not be encoded");
            (void)signer_resp_encode(a, out, sizeof out, &len);
        }
        if ((rc = sg_send(fd, out, len)) != AL_OK)
            break;
    }
    OPENSSL_cleanse(a, sizeof *a);
    free(a);
    return rc;
}

/* Load DATA/signing-key.pem, creating the key on first start. */
static int sg_load_key(const char *data_dir, int log_level, int log_format, struct keys_signing **k,
                       char *why, size_t cap)
{
    char path[KEYS_PATH_MAX], reason[256];
    int rc = keys_path(data_dir, KEYS_PRIVATE_FILE, path, sizeof path);
    if (rc != AL_OK) {
        al_errf(why, cap, "--data path too long");
        return rc;
    }
    rc = keys_load_private(path, k, reason, sizeof reason);
    if (rc == AL_E_NOENT) {
        struct keys_init_result res;
        rc = keys_init_dir(data_dir, false, &res, reason, sizeof reason);
        if (rc == AL_OK) {
            sg_log(SG_PROG, log_format, log_level, 1, "created signing key %s", res.kid);
            rc = keys_load_private(path, k, reason, sizeof reason);
        }
    }
    if (rc != AL_OK)
        al_errf(why, cap, "%s", reason);
    return rc;
}

int signer_main(int fd, const char *data_dir, int log_level, int log_format)
{
    int type = 0;
    socklen_t tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_SEQPACKET) {
        sg_log(SG_PROG, log_format, log_level, 0,
               "fd %d is not the seqpacket socket airlockd serve passes", fd);
        return 1;
    }
    /* Not dumpable: no core file, and a process of the same user (the
     * serving process, should it be taken over) can neither ptrace this
     * one nor read /proc/PID/mem. */
    struct rlimit no_core = {0, 0};
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || setrlimit(RLIMIT_CORE, &no_core) != 0) {
        sg_log(SG_PROG, log_format, log_level, 0, "cannot make the signer undumpable: %s",
               strerror(errno));
        return 1;
    }
    /* The serving process stops us by closing the socket; Ctrl-C reaches
     * the whole process group, and must not take the key away first. */
    (void)signal(SIGINT, SIG_IGN);
    (void)signal(SIGPIPE, SIG_IGN);
    struct keys_signing *k = NULL;
    char why[SIGNER_REASON_MAX + 1];
    int rc = sg_load_key(data_dir, log_level, log_format, &k, why, sizeof why);
    if (rc == AL_OK)
        sg_log(SG_PROG, log_format, log_level, 2, "serving key %s on fd %d", keys_kid(k), fd);
    rc = signer_serve(fd, k, rc == AL_OK ? NULL : why, log_level, log_format);
    bool loaded = k != NULL;
    keys_free(k);
    return rc == AL_OK && loaded ? 0 : 1;
}

/* ---- the serving side --------------------------------------------------------- */

struct signer {
    char exe[PATH_MAX];   /* what we exec */
    char argv0[PATH_MAX]; /* what ps shows: the binary's real path */
    char data_dir[PATH_MAX];
    char level[SG_LEVEL_TEXT];
    int log_level;
    int log_format; /* enum al_log_format */
    int fd;         /* -1: no signer running */
    pid_t pid;      /* -1: none */
    uint32_t next_id;
    char kid[KEYS_KID_LEN + 1]; /* "" until the first HELLO */
    uint64_t started_ms;        /* monotonic */
};

static uint64_t sg_now_ms(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Kill and reap the child, close the socket. */
static void sg_kill(struct signer *s)
{
    if (s->fd >= 0)
        (void)close(s->fd);
    s->fd = -1;
    if (s->pid > 0) {
        (void)kill(s->pid, SIGKILL);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    s->pid = -1;
}

/* One request, one answer within timeout_ms. AL_OK when an answer came
 * (its status is the signer's verdict); else the link failed. */
static int sg_exchange(struct signer *s, const struct signer_req *q, struct signer_resp *a,
                       int timeout_ms, char *why, size_t cap)
{
    uint8_t buf[SIGNER_RESP_MAX + 1];
    size_t len = 0;
    if (s->fd < 0) {
        al_errf(why, cap, "no signer running");
        return AL_E_CLOSED;
    }
    int rc = signer_req_encode(q, buf, sizeof buf, &len);
    if (rc != AL_OK) {
        al_errf(why, cap, "request does not fit the wire (aud and sub at most %d bytes)",
                SIGNER_STR_MAX);
        return AL_E_INVAL;
    }
    ssize_t n;
    do
        n = send(s->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)len) {
        al_errf(why, cap, "cannot write to the signer: %s", n < 0 ? strerror(errno) : "short");
        return AL_E_IO;
    }
    uint64_t deadline = sg_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = sg_now_ms();
        if (now >= deadline) {
            al_errf(why, cap, "the signer did not answer within %d ms", timeout_ms);
            return AL_E_TIMEOUT;
        }
        struct pollfd p = {s->fd, POLLIN, 0};
        int e = poll(&p, 1, (int)(deadline - now));
        if (e < 0 && errno == EINTR)
            continue;
        if (e < 0) {
            al_errf(why, cap, "poll: %s", strerror(errno));
            return AL_E_IO;
        }
        if (e == 0)
            continue;
        n = recv(s->fd, buf, sizeof buf, MSG_TRUNC | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        break;
    }
    if (n <= 0) {
        al_errf(why, cap, "%s%s", n == 0 ? "the signer exited" : "reading from the signer: ",
                n == 0 ? "" : strerror(errno));
        return n == 0 ? AL_E_CLOSED : AL_E_IO;
    }
    char perr[128];
    rc = signer_resp_parse(buf, (size_t)n, a, perr, sizeof perr);
    if (rc == AL_OK && (a->id != q->id || (a->op != q->op && a->op != 0))) {
        al_errf(perr, sizeof perr, "answer to request %u, not %u", (unsigned)a->id,
                (unsigned)q->id);
        rc = AL_E_PROTO;
    }
    if (rc != AL_OK) {
        al_errf(why, cap, "the signer's answer: %s", perr);
        return AL_E_PROTO;
    }
    return AL_OK;
}

/* Fork and exec a signer and take its HELLO. */
static int sg_spawn(struct signer *s, char *why, size_t cap)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        al_errf(why, cap, "socketpair: %s", strerror(errno));
        return AL_E_IO;
    }
    /* Everything the child needs is ready before fork: between fork and
     * exec it calls only async-signal-safe functions (the serving process
     * may have threads: libuv's pool). */
    char fd_text[] = {(char)('0' + SIGNER_CHILD_FD), '\0'};
    char *argv[] = {s->argv0,
                    "signer",
                    "--fd",
                    fd_text,
                    "--data",
                    s->data_dir,
                    "--log-level",
                    s->level,
                    "--log-format",
                    s->log_format == AL_LOG_JSON ? "json" : "text",
                    NULL};
    sigset_t none;
    (void)sigemptyset(&none);
    pid_t parent = getpid();
    s->started_ms = sg_now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        (void)close(sv[0]);
        (void)close(sv[1]);
        al_errf(why, cap, "fork: %s", strerror(errno));
        return AL_E_IO;
    }
    if (pid == 0) {
        (void)sigprocmask(SIG_SETMASK, &none, NULL);
        if (sv[1] == SIGNER_CHILD_FD) {
            (void)fcntl(sv[1], F_SETFD, 0);
        } else if (dup2(sv[1], SIGNER_CHILD_FD) < 0) {
            _exit(127);
        }
        (void)close_range(SIGNER_CHILD_FD + 1, ~0u, 0);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
            _exit(127);
        execv(s->exe, argv);
        _exit(127);
    }
    (void)close(sv[1]);
    s->fd = sv[0];
    s->pid = pid;
    struct signer_req q = {.op = SIGNER_OP_HELLO, .id = s->next_id++};
    struct signer_resp *a = malloc(sizeof *a);
    if (!a) {
        sg_kill(s);
        return AL_E_NOMEM;
    }
    int rc = sg_exchange(s, &q, a, SIGNER_START_TIMEOUT_MS, why, cap);
    if (rc == AL_OK && a->status != AL_OK) {
        rc = a->status;
        al_errf(why, cap, "%s", a->reason);
    } else if (rc == AL_OK && s->kid[0] && strcmp(s->kid, a->kid) != 0) {
        al_errf(why, cap,
                "signing key changed on disk from %s to %s (rotated?): restart airlockd to serve "
                "the new key",
                s->kid, a->kid);
        rc = AL_E_KID;
    } else if (rc == AL_OK) {
        (void)snprintf(s->kid, sizeof s->kid, "%s", a->kid);
        sg_log(SG_SERVER, s->log_format, s->log_level, 2, "signer pid %ld serves key %s", (long)pid,
               s->kid);
    }
    free(a);
    if (rc != AL_OK)
        sg_kill(s);
    return rc;
}

int signer_start(const struct signer_config *cfg, struct signer **out, char *err, size_t cap)
{
    if (!cfg || !cfg->data_dir || !out)
        return AL_E_INVAL;
    *out = NULL;
    struct signer *s = calloc(1, sizeof *s);
    if (!s)
        return AL_E_NOMEM;
    s->fd = -1;
    s->pid = -1;
    s->next_id = 1;
    s->log_level = cfg->log_level;
    s->log_format = cfg->log_format;
    int a = snprintf(s->exe, sizeof s->exe, "%s", cfg->exe ? cfg->exe : SG_SELF_EXE);
    int b = snprintf(s->data_dir, sizeof s->data_dir, "%s", cfg->data_dir);
    ssize_t n = readlink(s->exe, s->argv0, sizeof s->argv0 - 1);
    if (n <= 0)
        (void)snprintf(s->argv0, sizeof s->argv0, "%s", s->exe);
    else
        s->argv0[n] = '\0';
    (void)snprintf(s->level, sizeof s->level, "%d", cfg->log_level < 0 ? 0 : cfg->log_level % 10);
    if (a < 0 || (size_t)a >= sizeof s->exe || b < 0 || (size_t)b >= sizeof s->data_dir) {
        free(s);
        al_errf(err, cap, "path too long");
        return AL_E_TOOBIG;
    }
    char why[SIGNER_REASON_MAX + 64];
    int rc = sg_spawn(s, why, sizeof why);
    if (rc != AL_OK) {
        al_errf(err, cap, "signing key: %s", why);
        free(s);
        return rc;
    }
    *out = s;
    return AL_OK;
}

int signer_mint(struct signer *s, const struct signer_mint *m, struct signer_resp *out, char *why,
                size_t cap)
{
    if (!s || !m || !m->aud || !m->sub || !out)
        return AL_E_INVAL;
    struct signer_req q;
    memset(&q, 0, sizeof q);
    q.op = SIGNER_OP_MINT;
    q.shape = (uint8_t)m->shape;
    q.ttl = m->ttl;
    if (strlen(m->aud) > SIGNER_STR_MAX || strlen(m->sub) > SIGNER_STR_MAX) {
        al_errf(why, cap, "aud and sub are at most %d bytes", SIGNER_STR_MAX);
        return AL_E_INVAL;
    }
    memcpy(q.aud, m->aud, strlen(m->aud) + 1);
    memcpy(q.sub, m->sub, strlen(m->sub) + 1);
    char link[SIGNER_REASON_MAX + 64] = "";
    int rc = AL_E_CLOSED;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (s->fd < 0) {
            if (sg_now_ms() - s->started_ms < SIGNER_RESTART_MIN_MS) {
                al_errf(why, cap, "signer unavailable (%s); restarting at most once per %d ms",
                        link[0] ? link : "down", SIGNER_RESTART_MIN_MS);
                return rc;
            }
            if ((rc = sg_spawn(s, link, sizeof link)) != AL_OK) {
                sg_log(SG_SERVER, s->log_format, s->log_level, 0, "restarting the signer: %s",
                       link);
                al_errf(why, cap, "signer unavailable: %s", link);
                return rc;
            }
            sg_log(SG_SERVER, s->log_format, s->log_level, 0, "signer restarted (pid %ld)",
                   (long)s->pid);
        }
        q.id = s->next_id++;
        rc = sg_exchange(s, &q, out, SIGNER_TIMEOUT_MS, link, sizeof link);
        if (rc == AL_OK)
            break;
        sg_log(SG_SERVER, s->log_format, s->log_level, 0, "signer pid %ld failed: %s; killing it",
               (long)s->pid, link);
        sg_kill(s);
    }
    if (rc != AL_OK) {
        al_errf(why, cap, "signer unavailable: %s", link);
        return rc;
    }
    if (out->status != AL_OK) {
        al_errf(why, cap, "signer refused: %s", out->reason);
        return out->status;
    }
    return AL_OK;
}

const char *signer_kid(const struct signer *s)
{
    return s ? s->kid : "";
}

pid_t signer_pid(const struct signer *s)
{
    return s ? s->pid : -1;
}

void signer_stop(struct signer *s)
{
    if (!s)
        return;
    if (s->fd >= 0)
        (void)close(s->fd);
    s->fd = -1;
    for (int waited = 0; s->pid > 0 && waited < SIGNER_STOP_TIMEOUT_MS; waited += SG_STOP_POLL_MS) {
        pid_t w = waitpid(s->pid, NULL, WNOHANG);
        if (w == s->pid || (w < 0 && errno != EINTR))
            s->pid = -1;
        else
            (void)usleep(SG_STOP_POLL_MS * 1000);
    }
    sg_kill(s);
    free(s);
}
