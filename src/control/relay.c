/*
 * relay: see relay.h.
 *
 * Output path: runner DATA -> rl_term.log (ring, RL_LOG_BYTES per stream)
 * and the recording -> every client at its own cursor, copied into its host
 * endpoint as its ring has room. A client that stops reading only stops its
 * own cursor; when the log moves past it, it is resynced (GAP, then the
 * runner's screen snapshot at an offset the log still holds). The runner is
 * credited when bytes are durable, never when clients read them.
 *
 * Input path: the writer's stdin DATA -> rl_term.in (bounded by twice the
 * writer's credit) -> the runner's stdin stream as its ring has room; the
 * writer's credit returns as its bytes move on. Viewers get no stdin credit.
 *
 * Fair shares (docs/security.md): attach_share() keeps one user name
 * to RL_MAX_CLIENTS_PER_USER of a terminal's clients and the last
 * RL_RESERVED_CLIENTS for admins and its creator; each client's
 * SNAPSHOT_REQs pass its own rate limiter (snap_lim), one over the rate
 * waits in snap_due_us (repeats coalesce) until relay_tick serves it.
 * Snapshots: one SNAPSHOT_REQ at a time per terminal (snap_asked); its
 * answer fills the cache (snap) that serves every client waiting
 * (need_resync) and later ones while the log still holds its offset. An
 * ERROR in answer, or no answer within RL_SNAP_TIMEOUT_US, ends the wait
 * (term_snapshot_failed): those clients get the ERROR and a GAP to the
 * live output, and the next one asks the runner again.
 * Recordings keep input only if the terminal's record_input (fixed from
 * the sandbox's at creation) says so; writer changes are always marked.
 */
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "al_log.h"
#include "backoff.h"
#include "cast.h"
#include "endpoint.h"
#include "frame.h"
#include "lsbx.h"
#include "ratelim.h"
#include "ring.h"
#include "rkey.h"
#include "token.h"

#include <openssl/crypto.h>

#define RL_SCOPE SIGNER_RUNNER_SCOPE
#define RL_IN_CAP (2 * RL_CLIENT_WINDOW)
#define RL_PATH_MAX 4096
#define RL_RESPAWN_MS 1000
#define RL_PROC_CHECK_US 1000000ull
#define RL_MAX_BWRAP_ARGS 64
#define RL_HIST 32                 /* durable (offset, size) pairs kept */
#define RL_CLIENT_LAG (512u << 10) /* how far behind a client may hold the runner's ring */
/* Kept pairs lie at least this far apart (the newest excepted), so that
 * RL_HIST of them always reach back past RL_CLIENT_LAG and the credit can
 * move however small the syncs are. */
#define RL_HIST_STEP (RL_CLIENT_LAG / (RL_HIST / 2))
/* Liveness: with a client held back, the runner stops at (last ACK's
 * consumed) + window; the credit we can then pick lies within the lag, a
 * sync and a step of that, and must still be a quarter window past the
 * last ACK, or the endpoint sends none and nothing moves again. */
_Static_assert(RL_CLIENT_LAG + RL_SYNC_BYTES + RL_HIST_STEP + RL_RUNNER_WINDOW / 4 <
                   RL_RUNNER_WINDOW,
               "a client held at the lag must still let the runner's credit move");

struct rl_term;

struct rl_client {
    struct rl_term *t;
    struct rl_client *next;
    struct ep *ep;
    void *conn;
    char user[DB_NAME_MAX + 1];
    int may_write;   /* operator or admin, and not read-only */
    int wants_write; /* attached interactively */
    uint32_t ch;     /* the channel the client attached (0: not yet) */
    uint64_t cur[FR_NSTREAMS];
    int need_resync;
    int resynced;            /* at least once */
    uint64_t resync_at;      /* its stdout acknowledged offset then */
    int role_due;            /* send ROLE after this input */
    struct ratelim snap_lim; /* its SNAPSHOT_REQs */
    uint64_t snap_due_us;    /* a deferred SNAPSHOT_REQ is served then (0: none) */
    int exit_sent;
    int gone;
};

struct rl_term {
    struct rl_sbx *sb;
    struct rl_term *next;
    char id[DB_NAME_MAX + 1];
    uint32_t ch;
    uint8_t mode;
    uint16_t cols, rows;
    char creator[DB_NAME_MAX + 1]; /* "": none known */
    uint16_t prev_cols, prev_rows; /* the size before the last RESIZE sent */
    enum db_term_state state;
    int exited, exit_code, exit_signal;
    int closing;
    struct ring log[FR_NSTREAMS];
    /* durability */
    uint64_t consumed[FR_NSTREAMS]; /* credited to the runner */
    uint64_t rec_base;              /* stdout offset when the writer opened */
    struct cast *cast;
    int rec_failed;
    char rec_error[128];
    int64_t rec_bytes;
    struct rl_pair {
        uint64_t off;
        int64_t size;
    } hist[RL_HIST], persisted; /* recent durable (offset, size) pairs */
    unsigned nhist;
    uint64_t unsynced;
    uint64_t sync_due_us; /* 0: nothing to sync */
    int record_input;
    /* snapshot cache */
    uint8_t *snap;
    size_t snap_len;
    uint64_t snap_off;
    uint16_t snap_cols, snap_rows;
    int snap_have, snap_asked;
    uint64_t snap_asked_us; /* when snap_asked was set */
    /* input */
    uint8_t in[RL_IN_CAP];
    size_t in_len, in_owned; /* owned: the writer's bytes, at the tail */
    int in_eof, in_eof_sent; /* the writer closed stdin */
    struct rl_client *clients, *writer;
    unsigned nclients;
    int viewers_due;
};

struct rl_sbx {
    struct relay *r;
    struct rl_sbx *next;
    char id[DB_NAME_MAX + 1];
    enum db_sandbox_kind kind;
    enum db_sandbox_network network; /* local: as its row says (maybe the default) */
    char url[DB_SANDBOX_URL_MAX + 1];
    struct ep *ep;
    void *conn;     /* the current link */
    void *old_conn; /* a replaced link, to be closed */
    int up;
    int64_t since_ms; /* when up last changed */
    uint64_t token_due_us;
    uint64_t file_due_us; /* local: when the runner's token file is next rewritten */
    int64_t rtt_us;
    /* static: redial */
    struct backoff redial; /* static sandboxes: redials after a failure */
    uint64_t redial_us;    /* 0: none scheduled */
    int dialing;
    /* local: the runner process */
    struct lsbx_proc *proc; /* borrowed from lsbx until its exit callback */
    int proc_live;
    int pid;
    uint64_t proc_check_us;
    struct rl_term *terms;
    int removed;
};

struct relay {
    struct relay_config cfg;
    struct tok_keyset *keys;
    struct rl_sbx *sbxs;
    uint64_t bytes_out, bytes_in, resyncs, rec_errors;
};

/* ---- small helpers ------------------------------------------------------------ */

__attribute__((format(printf, 3, 4))) static void rlog(const struct relay *r, int level,
                                                       const char *fmt, ...)
{
    if (level > r->cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    al_vlog("airlockd", "relay", level, fmt, ap);
    va_end(ap);
}

uint64_t relay_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void audit(struct relay *r, const char *actor, const char *action, const char *target,
                  const char *detail)
{
    if (db_audit_add(r->cfg.db, 0, actor, action, target, detail) != AL_OK)
        rlog(r, 0, "audit %s: %s", action, db_errmsg(r->cfg.db));
}

static void wake(struct relay *r, void *conn)
{
    if (conn && r->cfg.wake)
        r->cfg.wake(conn);
}

static int path_in(const struct relay *r, char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int path_in(const struct relay *r, char *out, size_t cap, const char *fmt, ...)
{
    int n = snprintf(out, cap, "%s/", r->cfg.data_dir);
    if (n < 0 || (size_t)n >= cap)
        return AL_E_TOOBIG;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(out + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
    return m < 0 || (size_t)m >= cap - (size_t)n ? AL_E_TOOBIG : AL_OK;
}

static int mkdir_p(const char *path, mode_t mode)
{
    char tmp[RL_PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s", path);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return AL_E_TOOBIG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, mode) != 0 && errno != EEXIST)
            return AL_E_IO;
        *p = '/';
    }
    return mkdir(tmp, mode) != 0 && errno != EEXIST ? AL_E_IO : AL_OK;
}

/* ---- tokens ------------------------------------------------------------------- */

/* Mint a runner:connect token for a sandbox through the signer; `purpose`
 * says why, in the audit (written here, with the signer's jti and kid: the
 * signer has no database). */
static int mint(struct relay *r, const char *sandbox_id, const char *purpose, char *out, size_t cap)
{
    struct signer_mint m = {SIGNER_SHAPE_RUNNER, sandbox_id, SIGNER_RUNNER_SUB, RL_TOKEN_TTL_S};
    struct signer_resp *t = malloc(sizeof *t); /* 4 KiB of token */
    if (!t)
        return AL_E_NOMEM;
    char why[SIGNER_REASON_MAX + 128];
    int rc = signer_mint(r->cfg.signer, &m, t, why, sizeof why);
    if (rc == AL_OK && t->token_len >= cap)
        rc = AL_E_TOOBIG;
    if (rc != AL_OK) {
        rlog(r, 0, "minting a token for %s: %s", sandbox_id, rc == AL_E_TOOBIG ? "too long" : why);
        free(t);
        return rc;
    }
    memcpy(out, t->token, t->token_len + 1);
    char detail[512];
    (void)snprintf(detail, sizeof detail,
                   "{\"scope\":\"%s\",\"for\":\"%s\",\"ttl\":%d,\"jti\":\"%s\",\"kid\":\"%s\"}",
                   RL_SCOPE, purpose, RL_TOKEN_TTL_S, t->jti, t->kid);
    OPENSSL_cleanse(t, sizeof *t);
    free(t);
    audit(r, "system", "token_mint", sandbox_id, detail);
    return AL_OK;
}

_Static_assert(RL_TOKEN_TTL_S <= (int)SIGNER_RUNNER_TTL_MAX,
               "the signer's table allows our tokens");

int relay_runner_token_ok(struct relay *r, const char *sandbox_id, const char *token, char *why,
                          size_t cap)
{
    if (!token) {
        al_errf(why, cap, "no bearer token");
        return AL_E_PERM;
    }
    struct tok_verify_params p;
    tok_verify_params_init(&p, sandbox_id, RL_SCOPE, (int64_t)time(NULL));
    return tok_verify(r->keys, token, strlen(token), &p, NULL, why, cap);
}

int relay_runner_key_ok(struct relay *r, const char *sandbox_id, const char *key, char *why,
                        size_t cap)
{
    char pinned[RKEY_HASH_HEX + 1], h[RKEY_HASH_HEX + 1];
    size_t len = key ? strlen(key) : 0;
    if (len != AL_RUNNER_KEY_LEN) {
        al_errf(why, cap, "no runner key (%s)", AL_RUNNER_KEY_HEADER);
        return AL_E_PERM;
    }
    int rc = rkey_load(r->cfg.data_dir, sandbox_id, pinned);
    if (rc == AL_E_NOENT) { /* the first runner of a reverse sandbox: pinned */
        rkey_hash(key, len, h);
        rc = rkey_store(r->cfg.data_dir, sandbox_id, h);
        if (rc != AL_OK)
            al_errf(why, cap, "cannot pin the runner's key");
        else
            rlog(r, 1, "sandbox %s: runner key pinned", sandbox_id);
        return rc;
    }
    if (rc != AL_OK) {
        al_errf(why, cap, "cannot read the pinned runner key");
        return rc;
    }
    if (!rkey_matches(pinned, key, len)) {
        al_errf(why, cap,
                "runner key differs from the pinned one (another runner, or an "
                "impostor with a copied token)");
        return AL_E_PERM;
    }
    return AL_OK;
}

int relay_runner_key_forget(struct relay *r, const char *sandbox_id)
{
    return rkey_store(r->cfg.data_dir, sandbox_id, NULL);
}

/* ---- terminals: output, durability, snapshots ------------------------------------- */

static struct rl_term *term_by_ch(const struct rl_sbx *sb, uint32_t ch)
{
    for (struct rl_term *t = sb->terms; t; t = t->next)
        if (t->ch == ch)
            return t;
    return NULL;
}

static struct rl_term *term_by_id(const struct relay *r, const char *id)
{
    for (struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        for (struct rl_term *t = sb->terms; t; t = t->next)
            if (!strcmp(t->id, id))
                return t;
    return NULL;
}

static void rec_fail(struct rl_term *t, int rc)
{
    if (t->rec_failed)
        return;
    struct relay *r = t->sb->r;
    t->rec_failed = 1;
    r->rec_errors++;
    struct cast_status st;
    memset(&st, 0, sizeof st);
    if (t->cast)
        cast_status(t->cast, &st);
    (void)snprintf(t->rec_error, sizeof t->rec_error, "%s%s%s", al_strerror(rc),
                   st.sys_errno ? ": " : "", st.sys_errno ? strerror(st.sys_errno) : "");
    rlog(r, 0, "terminal %s: recording failed (%s); the terminal keeps running", t->id,
         t->rec_error);
    char detail[512];
    (void)snprintf(detail, sizeof detail, "{\"error\":\"%.120s\"}", t->rec_error);
    audit(r, "system", "recording_failed", t->id, detail);
}

/*
 * The offset to persist and credit: the durable end, held back (by at most
 * RL_CLIENT_LAG) to the slowest attached client's acknowledged position, so
 * that after a crash the runner still holds what that client has not got
 * and resends it. A client further behind is resynced instead.
 */
static uint64_t term_floor(const struct rl_term *t, uint64_t durable)
{
    uint64_t floor = durable;
    for (const struct rl_client *c = t->clients; c; c = c->next) {
        struct ep_stream_info si;
        /* one waiting for a snapshot needs nothing the runner holds */
        if (!c->ch || c->gone || c->need_resync ||
            ep_stream_info(c->ep, c->ch, FR_STDOUT, &si) != AL_OK)
            continue;
        if (si.acked < floor)
            floor = si.acked;
    }
    return durable - floor > RL_CLIENT_LAG ? durable - RL_CLIENT_LAG : floor;
}

/*
 * Make the recording durable, persist a pair (stream offset, recording
 * size) no newer than every client's position, then credit the runner with
 * that offset. With a failed recording the offsets still move on (the
 * terminal keeps running); the size stays at the last good sync.
 */
static void term_sync(struct rl_term *t)
{
    struct relay *r = t->sb->r;
    struct rl_pair now = {t->log[FR_STDOUT].end, t->rec_bytes};
    if (t->cast && !t->rec_failed) {
        int64_t size;
        int rc = cast_sync(t->cast, &size);
        if (rc != AL_OK) {
            rec_fail(t, rc);
        } else {
            struct cast_status st;
            cast_status(t->cast, &st);
            t->rec_bytes = now.size = size;
            now.off = t->rec_base + st.out_durable;
        }
    }
    if (!t->nhist || t->hist[t->nhist - 1].off != now.off) {
        if (t->nhist >= 2 && t->hist[t->nhist - 1].off - t->hist[t->nhist - 2].off < RL_HIST_STEP) {
            t->hist[t->nhist - 1] = now; /* the newest was too close to the one before */
        } else {
            if (t->nhist == RL_HIST) {
                memmove(t->hist, t->hist + 1, (RL_HIST - 1) * sizeof t->hist[0]);
                t->nhist--;
            }
            t->hist[t->nhist++] = now;
        }
    }
    uint64_t target = term_floor(t, now.off);
    struct rl_pair pick = t->persisted;
    for (unsigned i = 0; i < t->nhist; i++)
        if (t->hist[i].off <= target && t->hist[i].off >= pick.off && t->hist[i].size >= pick.size)
            pick = t->hist[i];
    uint64_t err_off = t->log[FR_STDERR].end;
    if (err_off < t->consumed[FR_STDERR])
        err_off = t->consumed[FR_STDERR];
    if (pick.off == t->persisted.off && pick.size == t->persisted.size &&
        err_off == t->consumed[FR_STDERR] && t->persisted.off == t->consumed[FR_STDOUT]) {
        /* held back and nothing new to store: look again later */
        t->unsynced = 0;
        t->sync_due_us = pick.off < now.off ? relay_now_us() + RL_SYNC_US : 0;
        return;
    }
    int rc = db_terminal_set_offsets(r->cfg.db, t->id, pick.off, err_off, (uint64_t)pick.size);
    if (rc != AL_OK) {
        rlog(r, 0, "terminal %s: persisting offsets: %s", t->id, db_errmsg(r->cfg.db));
        return; /* not durable: no credit; retried at the next sync */
    }
    t->persisted = pick;
    uint64_t off[FR_NSTREAMS] = {0, pick.off, err_off};
    for (unsigned s = FR_STDOUT; s <= FR_STDERR; s++) {
        if (off[s] > t->consumed[s] &&
            ep_consume(t->sb->ep, t->ch, s, (size_t)(off[s] - t->consumed[s])) == AL_OK)
            t->consumed[s] = off[s];
    }
    t->unsynced = 0;
    t->sync_due_us = pick.off < now.off ? relay_now_us() + RL_SYNC_US : 0;
    wake(r, t->sb->conn);
}

static void client_pump(struct rl_client *c);

static void term_want_snapshot(struct rl_term *t)
{
    if (t->snap_asked || t->mode != FR_MODE_PTY || !t->sb->up)
        return;
    if (ep_request_snapshot(t->sb->ep, t->ch) == AL_OK) {
        t->snap_asked = 1;
        t->snap_asked_us = relay_now_us();
        wake(t->sb->r, t->sb->conn);
    }
}

/*
 * The runner answered the snapshot request with an ERROR, or not in time:
 * every client waiting for it learns why (ERROR STATE on its channel) and
 * goes on live, after a GAP to the log's end, as it would on a terminal
 * with no screen. Nothing is cached, so the next client asks again (and
 * is served once the runner can make one).
 */
static void term_snapshot_failed(struct rl_term *t, const char *why)
{
    struct relay *r = t->sb->r;
    t->snap_asked = 0;
    char msg[AL_MAX_ERRMSG + 1];
    (void)snprintf(msg, sizeof msg, "no screen snapshot (%s): output goes on live after the gap",
                   why);
    for (struct rl_client *c = t->clients; c; c = c->next) {
        if (!c->ch || c->gone || !c->need_resync)
            continue;
        uint64_t to = t->log[FR_STDOUT].end;
        if (to < c->cur[FR_STDOUT])
            to = c->cur[FR_STDOUT];
        (void)ep_send_error(c->ep, c->ch, FR_ERR_STATE, msg);
        if (ep_resync(c->ep, c->ch, to, 0, 0, NULL, 0) == AL_OK) {
            c->cur[FR_STDOUT] = to;
            c->resynced = 1;
            c->resync_at = to;
        }
        c->need_resync = 0;
        rlog(r, 1, "terminal %s: %s: %s", t->id, c->user, msg);
        client_pump(c);
        wake(r, c->conn);
    }
}

/* The cached snapshot can serve a client whose cursor is at cur. */
static int snap_usable(const struct rl_term *t, uint64_t cur)
{
    const struct ring *l = &t->log[FR_STDOUT];
    return t->snap_have && t->snap_off >= l->base && t->snap_off <= l->end && t->snap_off >= cur &&
           t->snap_cols == t->cols && t->snap_rows == t->rows; /* not from before a resize */
}

static void client_close_err(struct rl_client *c, uint16_t code, const char *msg)
{
    (void)ep_send_error(c->ep, c->ch, code, msg);
    c->gone = 1;
}

/*
 * Move what the client may have next into its endpoint. Returns whether
 * anything was queued: only then does its connection need a writable
 * callback. (Waking it unconditionally made every writable callback that
 * found nothing to send ask for the next one: a busy loop of epoll_ctl and
 * epoll_wait for as long as a client is attached.)
 */
static int client_fill(struct rl_client *c)
{
    struct rl_term *t = c->t;
    struct relay *r = t->sb->r;
    int queued = 0;
    if (!c->ch || c->gone)
        return 0;
    if (c->need_resync) {
        if (t->mode == FR_MODE_PIPES) {
            uint64_t to = t->log[FR_STDOUT].base;
            if (to < c->cur[FR_STDOUT])
                to = c->cur[FR_STDOUT];
            if (ep_resync(c->ep, c->ch, to, 0, 0, NULL, 0) == AL_OK) {
                c->cur[FR_STDOUT] = to;
                queued = 1;
            }
            c->need_resync = 0;
        } else if (snap_usable(t, c->cur[FR_STDOUT])) {
            if (ep_resync(c->ep, c->ch, t->snap_off, t->snap_cols, t->snap_rows, t->snap,
                          t->snap_len) == AL_OK) {
                c->cur[FR_STDOUT] = t->snap_off;
                c->resynced = 1;
                c->resync_at = t->snap_off;
                r->resyncs++;
                queued = 1;
            }
            c->need_resync = 0;
        } else {
            term_want_snapshot(t);
            return 0;
        }
    }
    for (unsigned s = FR_STDOUT; s <= FR_STDERR; s++) {
        if (s == FR_STDERR && t->mode != FR_MODE_PIPES)
            break;
        const struct ring *l = &t->log[s];
        if (c->cur[s] < l->base) {
            if (s == FR_STDOUT) {
                struct ep_stream_info si;
                if (c->resynced && ep_stream_info(c->ep, c->ch, s, &si) == AL_OK &&
                    si.acked <= c->resync_at)
                    return queued;  /* still not reading since its last resync: wait for it */
                c->need_resync = 1; /* fell out of the window */
                rlog(r, 2, "terminal %s: %s fell behind: resync", t->id, c->user);
                return client_fill(c) || queued;
            }
            client_close_err(c, FR_ERR_LIMIT, "fell too far behind on stderr");
            return 1;
        }
        while (c->cur[s] < l->end) {
            size_t room = ep_writable(c->ep, c->ch, s);
            if (room == 0)
                break;
            const uint8_t *p;
            size_t n = ring_peek(l, c->cur[s], room, &p);
            if (n == 0)
                break;
            long w = ep_write(c->ep, c->ch, s, p, n);
            if (w <= 0)
                break;
            c->cur[s] += (uint64_t)w;
            queued = 1;
        }
    }
    if (t->exited && !c->exit_sent && c->cur[FR_STDOUT] == t->log[FR_STDOUT].end &&
        (t->mode != FR_MODE_PIPES || c->cur[FR_STDERR] == t->log[FR_STDERR].end)) {
        uint8_t sig = (uint8_t)(t->exit_signal > 0 ? t->exit_signal : 0);
        if (ep_exit(c->ep, c->ch, sig ? -1 : t->exit_code, sig, 0) == AL_OK) {
            c->exit_sent = 1;
            queued = 1;
        }
    }
    return queued;
}

/* Fill the client's endpoint, and wake its connection if that queued anything. */
static void client_pump(struct rl_client *c)
{
    if (client_fill(c))
        wake(c->t->sb->r, c->conn);
}

static void term_pump_all(struct rl_term *t)
{
    for (struct rl_client *c = t->clients; c; c = c->next)
        client_pump(c);
}

static void term_output(struct rl_term *t, unsigned s, uint64_t off, const uint8_t *p, size_t n)
{
    struct relay *r = t->sb->r;
    struct ring *l = &t->log[s];
    if (off != l->end) /* the endpoint delivers in order: cannot happen */
        ring_reset(l, off);
    if (ring_append(l, p, n) != AL_OK) {
        rlog(r, 0, "terminal %s: out of memory for the log", t->id);
        return;
    }
    r->bytes_out += n;
    uint64_t now = relay_now_us();
    if (s == FR_STDOUT && t->cast && !t->rec_failed) {
        int rc = cast_output(t->cast, (int64_t)now, p, n);
        if (rc != AL_OK)
            rec_fail(t, rc);
    }
    t->unsynced += n;
    if (!t->sync_due_us)
        t->sync_due_us = now + RL_SYNC_US;
    if (t->unsynced >= RL_SYNC_BYTES)
        term_sync(t);
    term_pump_all(t);
}

/* The runner's bytes [from, to) are gone: the log and the record skip them. */
static void term_gap(struct rl_term *t, unsigned s, uint64_t from, uint64_t to)
{
    struct relay *r = t->sb->r;
    rlog(r, 0, "terminal %s: the runner lost %llu bytes of output", t->id,
         (unsigned long long)(to - from));
    if (s == FR_STDOUT && t->cast && !t->rec_failed) {
        char label[64];
        (void)snprintf(label, sizeof label, "output lost: %llu bytes",
                       (unsigned long long)(to - from));
        (void)cast_marker(t->cast, (int64_t)relay_now_us(), label);
        term_sync(t);
        t->rec_base += to - from;
    }
    ring_reset(&t->log[s], to);
    t->consumed[s] = to; /* the endpoint counts the gap as delivered */
    term_pump_all(t);
}

static void term_exit(struct rl_term *t, int code, int signo)
{
    struct relay *r = t->sb->r;
    if (t->exited)
        return;
    t->exited = 1;
    t->exit_code = code;
    t->exit_signal = signo;
    if (db_terminal_set_exit(r->cfg.db, t->id, code, signo) != AL_OK)
        rlog(r, 0, "terminal %s: %s", t->id, db_errmsg(r->cfg.db));
    t->state = DB_TERM_EXITED;
    if (t->cast && !t->rec_failed) {
        int rc = cast_exit(t->cast, (int64_t)relay_now_us(), signo ? 128 + signo : code);
        if (rc != AL_OK && rc != AL_E_STATE)
            rec_fail(t, rc);
    }
    term_sync(t);
    rlog(r, 1, "terminal %s exited (%s %d)", t->id, signo ? "signal" : "code",
         signo ? signo : code);
    term_pump_all(t);
}

/* ---- terminals: input ------------------------------------------------------------ */

static void term_flush_input(struct rl_term *t)
{
    struct relay *r = t->sb->r;
    while (t->in_len) {
        long n = ep_write(t->sb->ep, t->ch, FR_STDIN, t->in, t->in_len);
        if (n <= 0)
            break;
        size_t prefix = t->in_len - t->in_owned; /* bytes of a former writer */
        size_t credit = (size_t)n > prefix ? (size_t)n - prefix : 0;
        if (t->cast && !t->rec_failed && t->record_input) {
            int rc = cast_input(t->cast, (int64_t)relay_now_us(), t->in, (size_t)n);
            if (rc != AL_OK)
                rec_fail(t, rc);
        }
        r->bytes_in += (uint64_t)n;
        memmove(t->in, t->in + n, t->in_len - (size_t)n);
        t->in_len -= (size_t)n;
        if (credit) {
            t->in_owned -= credit;
            if (t->writer && t->writer->ch)
                (void)ep_consume(t->writer->ep, t->writer->ch, FR_STDIN, credit);
            if (t->writer)
                wake(r, t->writer->conn);
        }
        wake(r, t->sb->conn);
    }
    if (!t->in_len && t->in_eof && !t->in_eof_sent && ep_eof(t->sb->ep, t->ch, FR_STDIN) == AL_OK) {
        t->in_eof_sent = 1;
        wake(r, t->sb->conn);
    }
}

/* The terminal's merged input stream: where the next writer goes on. */
static uint64_t term_in_next(const struct rl_term *t)
{
    struct ep_stream_info si;
    memset(&si, 0, sizeof si);
    (void)ep_stream_info(t->sb->ep, t->ch, FR_STDIN, &si);
    return si.end + t->in_len;
}

/* ---- clients ------------------------------------------------------------------------ */

static void term_viewers_changed(struct rl_term *t)
{
    const char *names[RL_MAX_CLIENTS];
    uint8_t roles[RL_MAX_CLIENTS];
    unsigned n = 0;
    for (struct rl_client *c = t->clients; c && n < RL_MAX_CLIENTS; c = c->next) {
        if (!c->ch || c->gone)
            continue;
        names[n] = c->user;
        roles[n++] = c == t->writer ? FR_WRITER : FR_VIEWER;
    }
    for (struct rl_client *c = t->clients; c; c = c->next) {
        if (!c->ch || c->gone)
            continue;
        (void)ep_viewers(c->ep, c->ch, n, names, roles);
        wake(t->sb->r, c->conn);
    }
}

static void set_writer(struct rl_term *t, struct rl_client *w)
{
    struct relay *r = t->sb->r;
    struct rl_client *old = t->writer;
    if (old == w)
        return;
    t->writer = w;
    t->in_owned = 0; /* what is queued is no longer anyone's credit */
    uint64_t in_next = term_in_next(t);
    if (old && old->ch && !old->gone) {
        (void)ep_set_role(old->ep, old->ch, FR_VIEWER, in_next);
        wake(r, old->conn);
    }
    if (w && w->ch) {
        (void)ep_set_role(w->ep, w->ch, FR_WRITER, in_next);
        wake(r, w->conn);
    }
    rlog(r, 1, "terminal %s: writer is %s", t->id, w ? w->user : "nobody");
    if (w && t->cast && !t->rec_failed) { /* who typed is kept, input or not */
        char label[DB_NAME_MAX + 16];
        (void)snprintf(label, sizeof label, "writer: %s", w->user);
        int e = cast_marker(t->cast, (int64_t)relay_now_us(), label);
        if (e != AL_OK && e != AL_E_STATE)
            rec_fail(t, e);
    }
    term_viewers_changed(t);
}

static void client_event(void *ud, const struct ep_event *ev)
{
    struct rl_client *c = ud;
    struct rl_term *t = c->t;
    if (!t)
        return;
    struct relay *r = t->sb->r;
    switch (ev->type) {
    case EP_EV_ATTACH: {
        if (c->ch)
            return; /* one terminal per connection: NO_CHANNEL */
        uint64_t out_next = ev->offset, err_next = ev->to;
        const struct ring *l = &t->log[FR_STDOUT], *le = &t->log[FR_STDERR];
        int resync = 0;
        if (t->mode == FR_MODE_PIPES) { /* no screen: what the log holds, after a GAP */
            out_next = out_next < l->base ? l->base : out_next;
            err_next = err_next < le->base ? le->base : err_next;
        } else {
            /* a fresh client, or one the log no longer serves, starts from a snapshot */
            resync = (out_next == 0 && l->end > 0) || out_next < l->base;
        }
        int rc = ep_host_adopt(c->ep, ev->channel, t->mode, out_next, err_next, term_in_next(t));
        if (rc != AL_OK)
            return;
        c->ch = ev->channel;
        c->cur[FR_STDOUT] = out_next;
        c->cur[FR_STDERR] = err_next;
        c->need_resync = resync;
        c->role_due = 1;
        return;
    }
    case EP_EV_DATA:
        if (ev->stream != FR_STDIN || c != t->writer) {
            (void)ep_consume(c->ep, ev->channel, ev->stream, ev->len);
            return;
        }
        if (ev->len > sizeof t->in - t->in_len) { /* cannot happen within credit */
            client_close_err(c, FR_ERR_LIMIT, "input beyond the credit");
            return;
        }
        memcpy(t->in + t->in_len, ev->data, ev->len);
        t->in_len += ev->len;
        t->in_owned += ev->len;
        term_flush_input(t);
        return;
    case EP_EV_EOF:
        if (ev->stream == FR_STDIN && c == t->writer) {
            t->in_eof = 1;
            term_flush_input(t);
        }
        return;
    case EP_EV_RESIZE:
        if (c == t->writer && (ev->cols != t->cols || ev->rows != t->rows))
            (void)relay_terminal_resize(r, t->id, ev->cols, ev->rows);
        return;
    case EP_EV_SIGNAL:
        if (c == t->writer && ep_signal(t->sb->ep, t->ch, ev->signo, ev->scope) == AL_OK)
            wake(r, t->sb->conn);
        else if (c != t->writer)
            (void)ep_send_error(c->ep, ev->channel, FR_ERR_FORBIDDEN, "only the writer may signal");
        return;
    case EP_EV_TAKEOVER:
        if (!c->may_write) {
            (void)ep_send_error(c->ep, ev->channel, FR_ERR_FORBIDDEN,
                                "read-only: your role or your attach cannot write");
            return;
        }
        {
            char detail[128];
            (void)snprintf(detail, sizeof detail, "{\"from\":\"%s\"}",
                           t->writer ? t->writer->user : "");
            audit(r, c->user, "takeover", t->id, detail);
        }
        set_writer(t, c);
        return;
    case EP_EV_SNAPSHOT_REQ: {
        if (c->need_resync || c->snap_due_us)
            return; /* coalesced with the one waiting */
        uint64_t now = relay_now_us();
        if (ratelim_take(&c->snap_lim, now)) {
            c->need_resync = 1;
        } else {
            c->snap_due_us = ratelim_next(&c->snap_lim, now);
            rlog(r, 2, "terminal %s: %s asks for snapshots too often: deferred", t->id, c->user);
        }
        return;
    }
    case EP_EV_WRITABLE:
        return; /* pumped after the input */
    case EP_EV_CLOSED:
        c->gone = 1; /* a detach: the terminal goes on */
        return;
    default:
        return;
    }
}

/* Whether a may take one more of t's slots: 0, or AL_E_LIMIT with why. */
static int attach_share(const struct rl_term *t, const struct rl_attach *a, char *why, size_t cap)
{
    unsigned mine = 0;
    for (const struct rl_client *c = t->clients; c; c = c->next)
        if (!strcmp(c->user, a->user))
            mine++;
    int kept_for = a->role == DB_ROLE_ADMIN || (t->creator[0] && !strcmp(t->creator, a->user));
    if (t->nclients >= RL_MAX_CLIENTS) {
        al_errf(why, cap, "terminal %s has %u attachments, the most it takes", t->id,
                RL_MAX_CLIENTS);
        return AL_E_LIMIT;
    }
    if (mine >= RL_MAX_CLIENTS_PER_USER) {
        al_errf(why, cap, "%s already has %u attachments to terminal %s, the most for one user",
                a->user, RL_MAX_CLIENTS_PER_USER, t->id);
        return AL_E_LIMIT;
    }
    if (!kept_for && t->nclients >= RL_MAX_CLIENTS - RL_RESERVED_CLIENTS) {
        al_errf(why, cap,
                "terminal %s has %u attachments; the last %u of %u are kept for admins and its "
                "creator",
                t->id, t->nclients, RL_RESERVED_CLIENTS, RL_MAX_CLIENTS);
        return AL_E_LIMIT;
    }
    return AL_OK;
}

int relay_attach(struct relay *r, const struct rl_attach *a, struct rl_client **out, char *why,
                 size_t cap)
{
    al_errf(why, cap, "%s", "");
    struct rl_term *t = term_by_id(r, a->term_id);
    if (!t || t->closing) {
        al_errf(why, cap, "no such live terminal");
        return AL_E_NOENT;
    }
    int src = attach_share(t, a, why, cap);
    if (src != AL_OK)
        return src;
    struct rl_client *c = calloc(1, sizeof *c);
    if (!c)
        return AL_E_NOMEM;
    struct ep_config cfg;
    ep_config_default(&cfg, FR_ROLE_HOST);
    cfg.name = "airlockd";
    cfg.tx_ring = RL_CLIENT_RING;
    cfg.window = RL_CLIENT_WINDOW;
    cfg.on_event = client_event;
    cfg.ud = c;
    int rc = ep_new(&cfg, &c->ep);
    if (rc != AL_OK) {
        free(c);
        return rc;
    }
    c->t = t;
    c->conn = a->conn;
    ratelim_init(&c->snap_lim, RL_CLIENT_SNAP_INTERVAL_US, RL_CLIENT_SNAP_BURST);
    (void)snprintf(c->user, sizeof c->user, "%s", a->user);
    c->may_write = a->role >= DB_ROLE_OPERATOR && !a->read_only;
    c->wants_write = c->may_write;
    c->next = t->clients;
    t->clients = c;
    t->nclients++;
    ep_link_up(c->ep, relay_now_us());
    char detail[96];
    (void)snprintf(detail, sizeof detail, "{\"mode\":\"%s\"}", c->may_write ? "write" : "read");
    audit(r, c->user, "attach", t->id, detail);
    rlog(r, 1, "terminal %s: %s attached (%s)", t->id, c->user, c->may_write ? "write" : "read");
    *out = c;
    wake(r, c->conn);
    return AL_OK;
}

void relay_client_gone(struct rl_client *c)
{
    if (!c)
        return;
    struct rl_term *t = c->t;
    if (!t) { /* its terminal went first */
        ep_free(c->ep);
        free(c);
        return;
    }
    for (struct rl_client **pp = &t->clients; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    t->nclients--;
    rlog(t->sb->r, 1, "terminal %s: %s detached", t->id, c->user);
    if (t->writer == c) {
        t->writer = NULL;
        t->in_owned = 0;
    }
    ep_free(c->ep);
    free(c);
    term_viewers_changed(t);
}

int relay_client_input(struct rl_client *c, const uint8_t *msg, size_t len)
{
    struct rl_term *t = c->t;
    if (!t)
        return AL_OK;
    int rc = ep_input(c->ep, msg, len, relay_now_us());
    if (c->role_due && c->ch) {
        c->role_due = 0;
        if (c->wants_write && !t->writer) {
            set_writer(t, c); /* the first interactive attacher writes (and tells all) */
        } else {
            (void)ep_set_role(c->ep, c->ch, FR_VIEWER, term_in_next(t));
            term_viewers_changed(t);
        }
    }
    client_pump(c);
    wake(t->sb->r, c->conn);
    return rc;
}

int relay_client_refuse(struct rl_client *c, uint16_t code, const char *why)
{
    int rc = ep_fail(c->ep, code, why);
    if (c->t)
        wake(c->t->sb->r, c->conn);
    return rc;
}

long relay_client_output(struct rl_client *c, uint8_t *buf, size_t cap)
{
    long n = ep_output(c->ep, buf, cap, relay_now_us());
    /* room may have freed: refill and go on in this same writable callback
     * (the caller loops while we return frames), without asking for another */
    if (n == 0 && c->ch && c->t && client_fill(c))
        n = ep_output(c->ep, buf, cap, relay_now_us());
    return n;
}

int relay_client_closing(struct rl_client *c, int *code, const char **reason)
{
    if (ep_closing(c->ep, code, reason))
        return 1;
    if (c->gone) {
        *code = EP_CLOSE_NORMAL;
        *reason = "detached";
        return 1;
    }
    return 0;
}

/* ---- runners ---------------------------------------------------------------------- */

static void set_link(struct rl_sbx *sb, int up)
{
    struct relay *r = sb->r;
    sb->up = up;
    sb->since_ms = wall_ms();
    if (db_sandbox_set_link(r->cfg.db, sb->id, up, sb->since_ms, sb->rtt_us) != AL_OK)
        rlog(r, 0, "sandbox %s: %s", sb->id, db_errmsg(r->cfg.db));
    audit(r, "system", up ? "link_up" : "link_down", sb->id, NULL);
    rlog(r, 1, "sandbox %s: link %s", sb->id, up ? "up" : "down");
}

static void term_state(struct rl_term *t, enum db_term_state s)
{
    struct relay *r = t->sb->r;
    if (t->state == s)
        return;
    if (db_terminal_set_state(r->cfg.db, t->id, s) != AL_OK)
        rlog(r, 0, "terminal %s: %s", t->id, db_errmsg(r->cfg.db));
    t->state = s;
}

static void term_free(struct rl_term *t)
{
    while (t->clients) {
        struct rl_client *c = t->clients;
        t->clients = c->next;
        c->t = NULL;
        ep_free(c->ep);
        free(c);
    }
    if (t->cast) {
        int rc = cast_close(t->cast);
        if (rc != AL_OK && !t->rec_failed)
            rlog(t->sb->r, 0, "terminal %s: closing the recording: %s", t->id, al_strerror(rc));
    }
    for (unsigned s = 0; s < FR_NSTREAMS; s++)
        ring_free(&t->log[s]);
    free(t->snap);
    free(t);
}

/* Forget a terminal whose channel is gone (its clients are told). */
static void term_drop(struct rl_term *t, enum db_term_state final)
{
    struct rl_sbx *sb = t->sb;
    if (t->cast)
        term_sync(t);
    if (final == DB_TERM_CLOSED && !t->exited) /* killed by its close */
        (void)db_terminal_set_exit(sb->r->cfg.db, t->id, -1, 9);
    term_state(t, final);
    for (struct rl_client *c = t->clients; c; c = c->next) {
        if (c->ch)
            (void)ep_close(c->ep, c->ch);
        c->gone = 1;
        wake(sb->r, c->conn);
    }
    /* clients stay allocated until their connections go; detach them */
    struct rl_client *c = t->clients;
    t->clients = NULL;
    while (c) {
        struct rl_client *n = c->next;
        c->next = NULL;
        c->t = NULL;
        c = n;
    }
    for (struct rl_term **pp = &sb->terms; *pp; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    }
    term_free(t);
}

/*
 * The runner refused the last RESIZE (its screen budget): the terminal keeps
 * the size it had, so snapshots (made at that size) serve clients again;
 * the recording and the writer learn of it.
 */
static void term_resize_refused(struct rl_term *t, const uint8_t *msg, size_t len)
{
    struct relay *r = t->sb->r;
    rlog(r, 1, "terminal %s: the runner refused a resize: %.*s", t->id, (int)len,
         (const char *)msg);
    if (!t->prev_cols || (t->prev_cols == t->cols && t->prev_rows == t->rows))
        return;
    t->cols = t->prev_cols;
    t->rows = t->prev_rows;
    if (t->cast && !t->rec_failed) {
        int e = cast_resize(t->cast, (int64_t)relay_now_us(), t->cols, t->rows);
        if (e != AL_OK && e != AL_E_STATE)
            rec_fail(t, e);
    }
    if (t->writer && t->writer->ch && !t->writer->gone) {
        char m[AL_MAX_ERRMSG + 1];
        (void)snprintf(m, sizeof m, "%.*s", (int)len, (const char *)msg);
        (void)ep_send_error(t->writer->ep, t->writer->ch, FR_ERR_LIMIT, m);
        wake(r, t->writer->conn);
    }
    term_pump_all(t);
}

static void runner_event(void *ud, const struct ep_event *ev)
{
    struct rl_sbx *sb = ud;
    struct relay *r = sb->r;
    struct rl_term *t = ev->channel ? term_by_ch(sb, ev->channel) : NULL;
    switch (ev->type) {
    case EP_EV_READY: {
        char tok[AL_MAX_TOKEN];
        if (mint(r, sb->id, "link", tok, sizeof tok) == AL_OK)
            (void)ep_send_token(sb->ep, tok, strlen(tok));
        (void)ep_ping(sb->ep); /* the link's RTT, shown at once */
        sb->token_due_us = relay_now_us() + RL_TOKEN_REFRESH_US;
        set_link(sb, 1);
        return;
    }
    case EP_EV_OPENED:
    case EP_EV_ATTACHED:
        if (!t)
            return;
        if (ev->type == EP_EV_OPENED || t->state == DB_TERM_OPENING)
            term_state(t, DB_TERM_RUNNING);
        for (struct rl_client *c = t->clients; c; c = c->next)
            if (c->need_resync)
                term_want_snapshot(t);
        term_flush_input(t);
        return;
    case EP_EV_LOST:
        if (t) {
            rlog(r, 0, "terminal %s: the runner no longer knows it", t->id);
            term_drop(t, DB_TERM_LOST);
        }
        return;
    case EP_EV_DATA:
        if (t)
            term_output(t, ev->stream, ev->offset, ev->data, ev->len);
        return;
    case EP_EV_GAP:
        if (t)
            term_gap(t, ev->stream, ev->offset, ev->to);
        return;
    case EP_EV_EXIT:
        if (t)
            term_exit(t, ev->signo ? -1 : ev->exit_code, ev->signo);
        return;
    case EP_EV_CLOSED:
        if (t)
            term_drop(t, DB_TERM_CLOSED);
        return;
    case EP_EV_SNAPSHOT:
        if (!t)
            return;
        {
            uint8_t *p = malloc(ev->len ? ev->len : 1);
            if (!p)
                return;
            if (ev->len)
                memcpy(p, ev->data, ev->len);
            free(t->snap);
            t->snap = p;
            t->snap_len = ev->len;
            t->snap_off = ev->offset;
            t->snap_cols = ev->cols;
            t->snap_rows = ev->rows;
            t->snap_have = 1;
            t->snap_asked = 0;
        }
        term_pump_all(t);
        return;
    case EP_EV_PONG:
        sb->rtt_us = (int64_t)ev->rtt_us;
        if (db_sandbox_set_link(r->cfg.db, sb->id, 1, sb->since_ms, sb->rtt_us) != AL_OK)
            rlog(r, 2, "sandbox %s: %s", sb->id, db_errmsg(r->cfg.db));
        return;
    case EP_EV_ERROR:
        rlog(r, 1, "sandbox %s: runner says (%u) %.*s", sb->id, ev->code, (int)ev->len,
             (const char *)ev->data);
        if (t && (ev->code == FR_ERR_OPEN_FAILED ||
                  (ev->code == FR_ERR_LIMIT && t->state == DB_TERM_OPENING))) {
            char detail[AL_MAX_ERRMSG + 32];
            json_t *d = json_pack("{s:s%}", "error", (const char *)ev->data, (size_t)ev->len);
            char *dj = d ? json_dumps(d, JSON_COMPACT) : NULL;
            (void)snprintf(detail, sizeof detail, "%s", dj ? dj : "{}");
            free(dj);
            json_decref(d);
            audit(r, "system", "open_failed", t->id, detail);
            term_exit(t, 127, 0);
            term_drop(t, DB_TERM_LOST);
        } else if (t && ev->code == FR_ERR_LIMIT) {
            term_resize_refused(t, ev->data, ev->len);
        } else if (t && t->snap_asked && (ev->code == FR_ERR_STATE || ev->code == FR_ERR_TOO_BIG)) {
            /* a runner's answer to SNAPSHOT_REQ when it cannot make one
             * (older runners said TOO_BIG above AL_MAX_SNAPSHOT) */
            char why[AL_MAX_ERRMSG + 16];
            (void)snprintf(why, sizeof why, "the runner says: %.*s", (int)ev->len,
                           (const char *)ev->data);
            term_snapshot_failed(t, why);
        }
        return;
    case EP_EV_WRITABLE:
        if (t && ev->stream == FR_STDIN)
            term_flush_input(t);
        return;
    default:
        return;
    }
}

static int sbx_new(struct relay *r, const struct db_sandbox *row, struct rl_sbx **out)
{
    struct rl_sbx *sb = calloc(1, sizeof *sb);
    if (!sb)
        return AL_E_NOMEM;
    sb->r = r;
    (void)snprintf(sb->id, sizeof sb->id, "%s", row->id);
    (void)snprintf(sb->url, sizeof sb->url, "%s", row->url);
    sb->kind = row->kind;
    backoff_init(&sb->redial, RL_REDIAL_MIN_MS, RL_REDIAL_MAX_MS);
    sb->network = row->network;
    sb->rtt_us = -1;
    struct ep_config cfg;
    ep_config_default(&cfg, FR_ROLE_CONTROLLER);
    cfg.name = "airlockd";
    cfg.window = RL_RUNNER_WINDOW;
    cfg.tx_ring = RL_RUNNER_WINDOW;
    cfg.on_event = runner_event;
    cfg.ud = sb;
    int rc = ep_new(&cfg, &sb->ep);
    if (rc != AL_OK) {
        free(sb);
        return rc;
    }
    sb->next = r->sbxs;
    r->sbxs = sb;
    *out = sb;
    return AL_OK;
}

struct rl_sbx *relay_sandbox(struct relay *r, const char *id)
{
    for (struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        if (!strcmp(sb->id, id) && !sb->removed)
            return sb;
    return NULL;
}

int relay_runner_up(struct rl_sbx *sb, void *conn, void **replaced)
{
    if (replaced)
        *replaced = NULL;
    if (sb->conn && sb->conn != conn) {
        if (replaced)
            *replaced = sb->conn;
        sb->old_conn = sb->conn;
        wake(sb->r, sb->old_conn);
    }
    sb->conn = conn;
    backoff_reset(&sb->redial);
    sb->dialing = 0;
    ep_link_up(sb->ep, relay_now_us());
    wake(sb->r, conn);
    return AL_OK;
}

static void schedule_redial(struct rl_sbx *sb)
{
    if (sb->kind != DB_SANDBOX_STATIC || sb->removed)
        return;
    sb->redial_us = relay_now_us() + backoff_next(&sb->redial) * 1000;
}

void relay_runner_down(struct rl_sbx *sb, void *conn)
{
    if (sb->old_conn == conn) {
        sb->old_conn = NULL;
        return;
    }
    if (sb->conn != conn)
        return;
    sb->conn = NULL;
    ep_link_down(sb->ep);
    for (struct rl_term *t = sb->terms; t; t = t->next)
        t->snap_asked = 0;
    if (sb->up)
        set_link(sb, 0);
    sb->dialing = 0;
    schedule_redial(sb);
}

void relay_dial_failed(struct rl_sbx *sb, const char *why)
{
    rlog(sb->r, 1, "sandbox %s: dial failed: %s", sb->id, why);
    sb->dialing = 0;
    schedule_redial(sb);
}

int relay_runner_input(struct rl_sbx *sb, void *conn, const uint8_t *msg, size_t len)
{
    if (conn != sb->conn)
        return AL_OK;
    int rc = ep_input(sb->ep, msg, len, relay_now_us());
    if (rc != AL_OK)
        rlog(sb->r, 1, "sandbox %s: runner broke the protocol: %s", sb->id, al_strerror(rc));
    wake(sb->r, conn);
    return rc;
}

int relay_runner_refuse(struct rl_sbx *sb, void *conn, uint16_t code, const char *why)
{
    if (conn != sb->conn)
        return AL_OK;
    rlog(sb->r, 1, "sandbox %s: runner's message refused: %s", sb->id, why);
    int rc = ep_fail(sb->ep, code, why);
    wake(sb->r, conn);
    return rc;
}

long relay_runner_output(struct rl_sbx *sb, void *conn, uint8_t *buf, size_t cap)
{
    if (conn != sb->conn)
        return 0;
    return ep_output(sb->ep, buf, cap, relay_now_us());
}

int relay_runner_closing(struct rl_sbx *sb, void *conn, int *code, const char **reason)
{
    if (conn == sb->old_conn || (sb->removed && conn == sb->conn)) {
        *code = EP_CLOSE_REPLACED;
        *reason = sb->removed ? "sandbox removed" : "replaced by a newer connection";
        return 1;
    }
    if (conn != sb->conn)
        return 0;
    return ep_closing(sb->ep, code, reason);
}

/* ---- local sandboxes: the runner process ----------------------------------------------- */

static int write_token_file(struct rl_sbx *sb)
{
    struct relay *r = sb->r;
    char dir[RL_PATH_MAX], path[RL_PATH_MAX], tmp[RL_PATH_MAX], tok[AL_MAX_TOKEN];
    if (path_in(r, dir, sizeof dir, "sandboxes/%s/run", sb->id) != AL_OK ||
        path_in(r, path, sizeof path, "sandboxes/%s/run/token", sb->id) != AL_OK ||
        path_in(r, tmp, sizeof tmp, "sandboxes/%s/run/token.tmp", sb->id) != AL_OK)
        return AL_E_TOOBIG;
    if (mkdir_p(dir, 0700) != AL_OK)
        return AL_E_IO;
    int rc = mint(r, sb->id, "token_file", tok, sizeof tok);
    if (rc != AL_OK)
        return rc;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return AL_E_IO;
    /* readable by the runner's host user alone (never by its agents: they
     * run in a jail that does not mount the run directory) */
    uid_t uid;
    gid_t gid;
    lsbx_owner(r->cfg.lsbx, &uid, &gid);
    size_t n = strlen(tok);
    int ok = (geteuid() != 0 || fchown(fd, uid, gid) == 0) && write(fd, tok, n) == (ssize_t)n;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        (void)unlink(tmp);
        return AL_E_IO;
    }
    return AL_OK;
}

static void on_proc_exit(void *data, int64_t status, int signo)
{
    struct rl_sbx *sb = data;
    rlog(sb->r, 1, "sandbox %s: runner exited (status %lld, signal %d)", sb->id, (long long)status,
         signo);
    sb->proc_live = 0;
    sb->pid = 0;
    sb->proc_check_us = relay_now_us() + RL_RESPAWN_MS * 1000ull;
    sb->proc = NULL;
}

static int pid_file(struct rl_sbx *sb, char *path, size_t cap)
{
    return path_in(sb->r, path, cap, "sandboxes/%s/run/runner.pid", sb->id);
}

/* A runner from an earlier airlockd may still run: it redials by itself. */
static int runner_alive(struct rl_sbx *sb)
{
    if (sb->proc_live)
        return 1;
    char path[RL_PATH_MAX], buf[32];
    if (pid_file(sb, path, sizeof path) != AL_OK)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    (void)close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    long pid = strtol(buf, NULL, 10);
    if (pid <= 1 || kill((pid_t)pid, 0) != 0)
        return 0;
    char cpath[64], cmd[4096];
    (void)snprintf(cpath, sizeof cpath, "/proc/%ld/cmdline", pid);
    fd = open(cpath, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, cmd, sizeof cmd - 1);
    (void)close(fd);
    if (n <= 0)
        return 0;
    cmd[n] = 0;
    for (ssize_t i = 0; i < n; i++)
        if (!cmd[i])
            cmd[i] = ' ';
    if (!strstr(cmd, "airlock-runner") && !strstr(cmd, "bwrap"))
        return 0;
    /* one dialing another address (airlockd moved or turned TLS on) is replaced */
    char want[DB_SANDBOX_URL_MAX + 128], got[DB_SANDBOX_URL_MAX + 128] = "";
    (void)snprintf(want, sizeof want, "%s/v1/runners/connect?identifier=%s", sb->r->cfg.self_url,
                   sb->id);
    /* and so is one whose agents have another network than the sandbox's
     * now (airlockd restarted with another --sandbox-network) */
    int cut = strstr(cmd, LSBX_NET_NONE_CMDLINE) != NULL;
    int want_cut = relay_sandbox_network(sb->r, sb->network) == DB_NETWORK_NONE;
    if (!strstr(cmd, want) || cut != want_cut) {
        (void)snprintf(got, sizeof got, "%.200s", cmd);
        rlog(sb->r, 1, "sandbox %s: replacing runner pid %ld (%s%s)", sb->id, pid, got,
             cut != want_cut ? "; its agents' network differs" : "");
        (void)kill((pid_t)-pid, SIGTERM);
        return 0;
    }
    sb->pid = (int)pid;
    return 1;
}

/* The runner, in its sandbox (lsbx.h says what it gets). */
static int spawn_runner(struct rl_sbx *sb)
{
    struct relay *r = sb->r;
    char run[RL_PATH_MAX], work[RL_PATH_MAX], url[DB_SANDBOX_URL_MAX + 128];
    char jwks_src[RL_PATH_MAX], why[512];
    if (path_in(r, run, sizeof run, "sandboxes/%s/run", sb->id) != AL_OK ||
        path_in(r, work, sizeof work, "sandboxes/%s/work", sb->id) != AL_OK ||
        path_in(r, jwks_src, sizeof jwks_src, "%s", KEYS_JWKS_FILE) != AL_OK)
        return AL_E_TOOBIG;
    const char *unusable = lsbx_unusable(r->cfg.lsbx);
    if (unusable) {
        rlog(r, 0, "sandbox %s: not started: %s", sb->id, unusable);
        return AL_E_PERM;
    }
    if (mkdir_p(run, 0700) != AL_OK || mkdir_p(work, 0755) != AL_OK)
        return AL_E_IO;
    /* the runner reads the public keys from its own directory */
    char jwks_dst[RL_PATH_MAX + 16];
    (void)snprintf(jwks_dst, sizeof jwks_dst, "%s/jwks.json", run);
    {
        FILE *in = fopen(jwks_src, "rbe");
        FILE *o = in ? fopen(jwks_dst, "wbe") : NULL;
        char buf[8192];
        size_t n;
        int ok = in && o;
        while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0)
            ok = fwrite(buf, 1, n, o) == n;
        if (in)
            (void)fclose(in);
        if (o && fclose(o) != 0)
            ok = 0;
        if (!ok)
            return AL_E_IO;
    }
    int rc = write_token_file(sb);
    if (rc == AL_OK)
        sb->file_due_us = relay_now_us() + RL_TOKEN_REFRESH_US;
    if (rc != AL_OK)
        return rc;
    (void)snprintf(url, sizeof url, "%s/v1/runners/connect?identifier=%s", r->cfg.self_url, sb->id);
    /* a fresh key for this runner, pinned before it dials: only it can link */
    char key[AL_RUNNER_KEY_LEN + 1], kh[RKEY_HASH_HEX + 1];
    if (rkey_new(key) != AL_OK)
        return AL_E_IO;
    rkey_hash(key, strlen(key), kh);
    rc = rkey_store(r->cfg.data_dir, sb->id, kh);
    if (rc != AL_OK) {
        OPENSSL_cleanse(key, sizeof key);
        return rc;
    }
    struct lsbx_spawn sp = {
        .link_key = key,
        .id = sb->id,
        .url = url,
        .run_dir = run,
        .work_dir = work,
        .insecure_tls = r->cfg.insecure_tls,
        .no_network = relay_sandbox_network(r, sb->network) == DB_NETWORK_NONE,
        .exit_cb = on_proc_exit,
        .data = sb,
    };
    why[0] = 0;
    rc = lsbx_start(r->cfg.lsbx, &sp, &sb->proc, &sb->pid, why, sizeof why);
    OPENSSL_cleanse(key, sizeof key);
    if (rc != AL_OK) {
        rlog(r, 0, "sandbox %s: cannot start its runner: %s", sb->id, why);
        return rc;
    }
    sb->proc_live = 1;
    char pidp[RL_PATH_MAX], pidtxt[32];
    if (pid_file(sb, pidp, sizeof pidp) == AL_OK) {
        int fd = open(pidp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            int m = snprintf(pidtxt, sizeof pidtxt, "%d\n", sb->pid);
            if (write(fd, pidtxt, (size_t)m) != m)
                rlog(r, 0, "sandbox %s: cannot write %s", sb->id, pidp);
            (void)close(fd);
        }
    }
    return AL_OK;
}

/* ---- sandboxes, from the API and at start --------------------------------------- */

enum db_sandbox_network relay_sandbox_network(const struct relay *r, enum db_sandbox_network n)
{
    if (n == DB_NETWORK_DEFAULT)
        return r->cfg.no_network ? DB_NETWORK_NONE : DB_NETWORK_HOST;
    return n == DB_NETWORK_NONE ? DB_NETWORK_NONE : DB_NETWORK_HOST;
}

static void sbx_start(struct rl_sbx *sb)
{
    if (sb->kind == DB_SANDBOX_LOCAL) {
        sb->proc_check_us = 1; /* at the next tick */
    } else if (sb->kind == DB_SANDBOX_STATIC) {
        sb->redial_us = 1;
    }
}

int relay_sandbox_added(struct relay *r, const char *id, char *why, size_t cap)
{
    struct db_sandbox row;
    int rc = db_sandbox_get(r->cfg.db, id, &row);
    if (rc != AL_OK) {
        al_errf(why, cap, "%s", db_errmsg(r->cfg.db));
        return rc;
    }
    struct rl_sbx *sb;
    rc = sbx_new(r, &row, &sb);
    if (rc != AL_OK) {
        al_errf(why, cap, "%s", al_strerror(rc));
        return rc;
    }
    sbx_start(sb);
    return AL_OK;
}

void relay_sandbox_removed(struct relay *r, const char *id)
{
    struct rl_sbx *sb = relay_sandbox(r, id);
    if (!sb)
        return;
    sb->removed = 1;
    if (sb->pid > 1) /* its own session (detached): the whole group */
        (void)kill(-sb->pid, SIGTERM);
    wake(r, sb->conn);
}

static int cast_start(struct rl_term *t, const struct db_terminal *row)
{
    struct relay *r = t->sb->r;
    char dir[RL_PATH_MAX], path[RL_PATH_MAX], why[256];
    if (path_in(r, dir, sizeof dir, "recordings") != AL_OK ||
        path_in(r, path, sizeof path, "recordings/%s.cast", t->id) != AL_OK)
        return AL_E_TOOBIG;
    if (mkdir_p(dir, 0700) != AL_OK)
        return AL_E_IO;
    struct cast_header h;
    memset(&h, 0, sizeof h);
    h.cols = row->cols;
    h.rows = row->rows;
    h.term_type = "xterm-256color";
    h.timestamp = row->created_at / 1000;
    h.command = row->argv_json;
    /* a monotonic start consistent with created_at, so a resume continues */
    int64_t age_us = (wall_ms() - row->created_at) * 1000;
    int64_t now = (int64_t)relay_now_us();
    h.start_us = age_us > 0 && age_us < now ? now - age_us : now;
    t->rec_base = row->out_offset;
    t->rec_bytes = (int64_t)row->rec_bytes;
    t->persisted.off = row->out_offset;
    t->persisted.size = (int64_t)row->rec_bytes;
    /* No size stored: nothing of this recording was ever credited (a crash
     * right after creation, or no client ever acknowledged), so the runner
     * resends from out_offset and a file left behind is started afresh. */
    if (row->rec_bytes == 0 && unlink(path) == 0)
        rlog(r, 1, "terminal %s: recording restarts (nothing of it was durable)", t->id);
    int rc = cast_open(path, &h, (int64_t)row->rec_bytes, &t->cast, why, sizeof why);
    if (rc != AL_OK) {
        rlog(r, 0, "terminal %s: recording %s: %s", t->id, path, why);
        t->cast = NULL;
        rec_fail(t, rc);
        (void)snprintf(t->rec_error, sizeof t->rec_error, "%.120s", why);
    }
    return rc;
}

static int term_new(struct rl_sbx *sb, const struct db_terminal *row, struct rl_term **out)
{
    struct rl_term *t = calloc(1, sizeof *t);
    if (!t)
        return AL_E_NOMEM;
    t->sb = sb;
    (void)snprintf(t->id, sizeof t->id, "%s", row->id);
    t->ch = row->channel;
    t->mode = row->mode == DB_MODE_PIPES ? FR_MODE_PIPES : FR_MODE_PTY;
    t->cols = row->cols;
    t->rows = row->rows;
    t->state = row->state;
    t->record_input = row->record_input;
    (void)snprintf(t->creator, sizeof t->creator, "%s", row->creator);
    t->consumed[FR_STDOUT] = row->out_offset;
    t->consumed[FR_STDERR] = row->err_offset;
    ring_init(&t->log[FR_STDOUT], RL_LOG_BYTES, row->out_offset);
    ring_init(&t->log[FR_STDERR], RL_LOG_BYTES, row->err_offset);
    if (row->state == DB_TERM_EXITED) {
        t->exited = 1;
        t->exit_code = row->exit_code;
        t->exit_signal = row->exit_signal;
    }
    (void)cast_start(t, row); /* a recording failure never stops a terminal */
    t->next = sb->terms;
    sb->terms = t;
    *out = t;
    return AL_OK;
}

int relay_terminal_create(struct relay *r, const struct apireq_terminal *spec, const char *creator,
                          char *id_out, size_t cap, char *why, size_t why_cap)
{
    struct rl_sbx *sb = relay_sandbox(r, spec->sandbox);
    struct db_sandbox *srow = sb ? malloc(sizeof *srow) : NULL;
    if (!sb || !srow || db_sandbox_get(r->cfg.db, sb->id, srow) != AL_OK) {
        free(srow);
        al_errf(why, why_cap, "no sandbox \"%s\"", spec->sandbox);
        return AL_E_NOENT;
    }
    /* input is recorded only where the sandbox allows it and the terminal wants it */
    bool record_input = srow->record_input && spec->record_input;
    free(srow);
    struct fr_open *o = calloc(1, sizeof *o);
    if (!o)
        return AL_E_NOMEM;
    o->mode = spec->mode == DB_MODE_PIPES ? FR_MODE_PIPES : FR_MODE_PTY;
    o->cols = spec->cols;
    o->rows = spec->rows;
    o->term.p = spec->term;
    o->term.len = (uint16_t)strlen(spec->term);
    o->cwd.p = spec->cwd;
    o->cwd.len = (uint16_t)strlen(spec->cwd);
    o->argc = (uint16_t)spec->argc;
    for (size_t i = 0; i < spec->argc; i++) {
        o->argv[i].p = spec->argv[i];
        o->argv[i].len = (uint16_t)strlen(spec->argv[i]);
    }
    o->envc = (uint16_t)spec->envc;
    for (size_t i = 0; i < spec->envc; i++) {
        o->env[i].p = spec->env[i];
        o->env[i].len = (uint16_t)strlen(spec->env[i]);
    }
    long ch = ep_open(sb->ep, o);
    free(o);
    if (ch < 0) {
        al_errf(why, why_cap, "cannot open a channel: %s", al_strerror((int)ch));
        return (int)ch;
    }
    struct db_terminal_spec ds = {
        .sandbox_id = sb->id,
        .channel = (uint32_t)ch,
        .argv_json = spec->argv_json,
        .cwd = spec->cwd,
        .env_json = spec->env_json,
        .cols = spec->cols,
        .rows = spec->rows,
        .mode = spec->mode,
        .creator = creator,
        .record_input = record_input,
    };
    int rc = db_terminal_add(r->cfg.db, &ds, id_out, cap);
    struct db_terminal *row = rc == AL_OK ? malloc(sizeof *row) : NULL;
    if (rc == AL_OK && (!row || db_terminal_get(r->cfg.db, id_out, row) != AL_OK))
        rc = AL_E_NOMEM;
    struct rl_term *t = NULL;
    if (rc == AL_OK)
        rc = term_new(sb, row, &t);
    free(row);
    if (rc != AL_OK) {
        al_errf(why, why_cap, "%s", db_errmsg(r->cfg.db));
        (void)ep_close(sb->ep, (uint32_t)ch);
        return rc;
    }
    wake(r, sb->conn);
    rlog(r, 1, "terminal %s opened on %s channel %ld", id_out, sb->id, ch);
    return AL_OK;
}

int relay_terminal_signal(struct relay *r, const char *id, unsigned signo)
{
    struct rl_term *t = term_by_id(r, id);
    if (!t)
        return AL_E_NOENT;
    int rc = ep_signal(t->sb->ep, t->ch, (uint8_t)signo, FR_SIG_TREE);
    wake(r, t->sb->conn);
    return rc;
}

int relay_terminal_resize(struct relay *r, const char *id, uint16_t cols, uint16_t rows)
{
    struct rl_term *t = term_by_id(r, id);
    if (!t)
        return AL_E_NOENT;
    int rc = ep_resize(t->sb->ep, t->ch, cols, rows);
    if (rc != AL_OK)
        return rc;
    t->prev_cols = t->cols;
    t->prev_rows = t->rows;
    t->cols = cols;
    t->rows = rows;
    if (t->cast && !t->rec_failed) {
        int e = cast_resize(t->cast, (int64_t)relay_now_us(), cols, rows);
        if (e != AL_OK && e != AL_E_STATE)
            rec_fail(t, e);
    }
    wake(r, t->sb->conn);
    return AL_OK;
}

int relay_terminal_close(struct relay *r, const char *id)
{
    struct rl_term *t = term_by_id(r, id);
    if (!t)
        return AL_E_NOENT;
    t->closing = 1;
    int rc = ep_close(t->sb->ep, t->ch);
    wake(r, t->sb->conn);
    if (rc == AL_E_NOCHAN) {
        term_drop(t, DB_TERM_CLOSED);
        return AL_OK;
    }
    return rc;
}

void relay_terminal_info(struct relay *r, const char *id, struct rl_term_info *out)
{
    memset(out, 0, sizeof *out);
    struct rl_term *t = term_by_id(r, id);
    if (!t)
        return;
    out->live = 1;
    for (struct rl_client *c = t->clients; c && out->clients < RL_MAX_CLIENTS; c = c->next) {
        if (!c->ch || c->gone)
            continue;
        out->names[out->clients] = c->user;
        out->roles[out->clients++] = c == t->writer ? FR_WRITER : FR_VIEWER;
    }
    if (t->writer)
        (void)snprintf(out->writer, sizeof out->writer, "%s", t->writer->user);
    out->out_end = t->log[FR_STDOUT].end;
    out->cols = t->cols;
    out->rows = t->rows;
    out->rec_bytes = (uint64_t)t->rec_bytes;
    out->rec_failed = t->rec_failed;
    (void)snprintf(out->rec_error, sizeof out->rec_error, "%s", t->rec_error);
}

void relay_metrics(const struct relay *r, struct rl_metrics *m)
{
    memset(m, 0, sizeof *m);
    for (const struct rl_sbx *sb = r->sbxs; sb; sb = sb->next) {
        if (sb->removed)
            continue;
        m->sandboxes++;
        m->links_up += sb->up ? 1u : 0u;
        for (const struct rl_term *t = sb->terms; t; t = t->next) {
            m->terminals++;
            m->clients += t->nclients;
        }
    }
    m->bytes_out = r->bytes_out;
    m->bytes_in = r->bytes_in;
    m->resyncs = r->resyncs;
    m->rec_errors = r->rec_errors;
}

void relay_each_link(const struct relay *r, rl_link_fn *fn, void *ud)
{
    for (const struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        if (!sb->removed)
            fn(ud, sb->id, sb->up, sb->up ? sb->rtt_us : -1);
}

/* ---- time ---------------------------------------------------------------------------- */

static void sbx_tick(struct rl_sbx *sb, uint64_t now)
{
    struct relay *r = sb->r;
    int due = ep_next_deadline(sb->ep) <= now; /* a PING or a timeout may be queued */
    ep_tick(sb->ep, now);
    if (sb->conn && ep_ready(sb->ep) && now >= sb->token_due_us) {
        char tok[AL_MAX_TOKEN];
        if (mint(r, sb->id, "refresh", tok, sizeof tok) == AL_OK &&
            ep_send_token(sb->ep, tok, strlen(tok)) == AL_OK)
            due = 1;
        sb->token_due_us = now + RL_TOKEN_REFRESH_US;
    }
    if (sb->conn && (due || ep_closing(sb->ep, NULL, NULL)))
        wake(r, sb->conn);
    if (sb->kind == DB_SANDBOX_STATIC && !sb->removed && !sb->conn && !sb->dialing &&
        sb->redial_us && now >= sb->redial_us) {
        sb->redial_us = 0;
        char tok[AL_MAX_TOKEN];
        if (mint(r, sb->id, "dial", tok, sizeof tok) == AL_OK && r->cfg.dial) {
            sb->dialing = 1;
            if (r->cfg.dial(r->cfg.dial_ud, sb, sb->url, tok) != AL_OK)
                relay_dial_failed(sb, "cannot start the connection");
        } else {
            schedule_redial(sb);
        }
    }
    if (sb->kind == DB_SANDBOX_LOCAL && !sb->removed && sb->proc_check_us &&
        now >= sb->proc_check_us) {
        sb->proc_check_us = now + RL_PROC_CHECK_US;
        if (!runner_alive(sb) && spawn_runner(sb) != AL_OK)
            sb->proc_check_us = now + RL_RESPAWN_MS * 5000ull;
    }
    /* a local runner redials with its token file: keep it fresh, linked or not
     * (after airlockd was down longer than a token lives, its first write
     * lets the waiting runner in) */
    if (sb->kind == DB_SANDBOX_LOCAL && !sb->removed && now >= sb->file_due_us) {
        sb->file_due_us = now + RL_TOKEN_REFRESH_US;
        if (write_token_file(sb) != AL_OK)
            rlog(r, 0, "sandbox %s: cannot refresh the runner's token file", sb->id);
    }
    for (struct rl_term *t = sb->terms; t; t = t->next) {
        if (t->sync_due_us && now >= t->sync_due_us)
            term_sync(t);
        if (t->snap_asked && now - t->snap_asked_us >= RL_SNAP_TIMEOUT_US)
            term_snapshot_failed(t, "the runner did not answer in time");
        for (struct rl_client *c = t->clients; c; c = c->next) {
            int ping = ep_next_deadline(c->ep) <= now; /* a PING may be queued */
            ep_tick(c->ep, now);
            if (c->snap_due_us && now >= c->snap_due_us && ratelim_take(&c->snap_lim, now)) {
                c->snap_due_us = 0; /* the deferred SNAPSHOT_REQ's turn */
                c->need_resync = 1;
                client_pump(c);
            }
            if (ping || ep_closing(c->ep, NULL, NULL))
                wake(r, c->conn);
        }
    }
}

void relay_tick(struct relay *r, uint64_t now_us)
{
    for (struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        sbx_tick(sb, now_us);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

uint64_t relay_next_deadline(const struct relay *r)
{
    uint64_t d = UINT64_MAX;
    for (const struct rl_sbx *sb = r->sbxs; sb; sb = sb->next) {
        d = min_u64(d, ep_next_deadline(sb->ep));
        if (sb->conn)
            d = min_u64(d, sb->token_due_us);
        if (sb->redial_us)
            d = min_u64(d, sb->redial_us);
        if (sb->proc_check_us)
            d = min_u64(d, sb->proc_check_us);
        for (const struct rl_term *t = sb->terms; t; t = t->next) {
            if (t->sync_due_us)
                d = min_u64(d, t->sync_due_us);
            if (t->snap_asked)
                d = min_u64(d, t->snap_asked_us + RL_SNAP_TIMEOUT_US);
            for (const struct rl_client *c = t->clients; c; c = c->next) {
                d = min_u64(d, ep_next_deadline(c->ep));
                if (c->snap_due_us)
                    d = min_u64(d, c->snap_due_us);
            }
        }
    }
    return d;
}

/* ---- start and stop ------------------------------------------------------------------ */

static int load_sandbox(void *ctx, const struct db_sandbox *row)
{
    struct relay *r = ctx;
    struct rl_sbx *sb;
    int rc = sbx_new(r, row, &sb);
    if (rc == AL_OK)
        sbx_start(sb);
    return rc;
}

static int load_terminal(void *ctx, const struct db_terminal *row)
{
    struct relay *r = ctx;
    if (row->state == DB_TERM_CLOSED || row->state == DB_TERM_LOST)
        return 0;
    struct rl_sbx *sb = relay_sandbox(r, row->sandbox_id);
    if (!sb)
        return 0;
    struct rl_term *t;
    int rc = term_new(sb, row, &t);
    if (rc != AL_OK)
        return rc;
    rc = ep_adopt(sb->ep, t->ch, t->mode, row->out_offset, row->err_offset);
    if (rc != AL_OK)
        rlog(r, 0, "terminal %s: cannot adopt channel %u: %s", t->id, t->ch, al_strerror(rc));
    else
        rlog(r, 1, "terminal %s: resuming at output offset %llu", t->id,
             (unsigned long long)row->out_offset);
    return 0;
}

int relay_new(const struct relay_config *cfg, struct relay **out, char *err, size_t cap)
{
    struct relay *r = calloc(1, sizeof *r);
    if (!r)
        return AL_E_NOMEM;
    r->cfg = *cfg;
    char path[RL_PATH_MAX], why[256];
    int rc = path_in(r, path, sizeof path, "%s", KEYS_JWKS_FILE);
    if (rc == AL_OK)
        rc = tok_keyset_from_file(path, &r->keys, why, sizeof why);
    if (rc != AL_OK) {
        al_errf(err, cap, "public keys %s: %s", path, why);
        free(r);
        return rc;
    }
    rc = db_sandbox_list(cfg->db, load_sandbox, r);
    if (rc == AL_OK)
        rc = db_terminal_list(cfg->db, NULL, load_terminal, r);
    if (rc != AL_OK) {
        al_errf(err, cap, "loading state: %s", db_errmsg(cfg->db));
        relay_free(r);
        return rc;
    }
    *out = r;
    return AL_OK;
}

void relay_free(struct relay *r)
{
    if (!r)
        return;
    while (r->sbxs) {
        struct rl_sbx *sb = r->sbxs;
        r->sbxs = sb->next;
        while (sb->terms) {
            struct rl_term *t = sb->terms;
            sb->terms = t->next;
            if (t->cast)
                term_sync(t);
            term_free(t);
        }
        if (sb->proc) { /* the runner keeps running: airlockd relinks on start */
            lsbx_proc_forget(sb->proc);
            sb->proc = NULL;
        }
        ep_free(sb->ep);
        free(sb);
    }
    tok_keyset_free(r->keys);
    free(r);
}
