/*
 * relay_terminal: the relay's terminals (struct rl_term, relay_int.h), each
 * a channel on its sandbox's runner. Made when the API creates one (the
 * OPEN goes to the runner, the row to the database) or adopted at start at
 * its durable offsets; its state follows the runner's events (running,
 * exited, lost, closed) into the database; dropped when its channel is
 * gone, its clients then told. Also the API's actions on a terminal
 * (signal, resize, close, info) and the input path:
 *
 * Input path: the writer's stdin DATA -> rl_term.in (bounded by twice the
 * writer's credit) -> the runner's stdin stream as its ring has room; the
 * writer's credit returns as its bytes move on. Viewers get no stdin credit.
 * Recordings keep input only if the terminal's record_input (fixed from
 * the sandbox's at creation) says so.
 *
 * Not here: the output, the recording and the snapshots (relay_output.c),
 * the clients and who writes (relay_client.c).
 */
#include "relay_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "al_limits.h"
#include "cast.h"
#include "endpoint.h"

/* ---- lookups and lifecycle ------------------------------------------------------- */

struct rl_term *relay_terminal_by_ch(const struct rl_sbx *sb, uint32_t ch)
{
    for (struct rl_term *t = sb->terms; t; t = t->next)
        if (t->ch == ch)
            return t;
    return NULL;
}

struct rl_term *relay_terminal_by_id(const struct relay *r, const char *id)
{
    for (struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        for (struct rl_term *t = sb->terms; t; t = t->next)
            if (!strcmp(t->id, id))
                return t;
    return NULL;
}

int relay_terminal_new(struct rl_sbx *sb, const struct db_terminal *row, struct rl_term **out)
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
    (void)relay_output_rec_open(t, row); /* a recording failure never stops a terminal */
    t->next = sb->terms;
    sb->terms = t;
    *out = t;
    return AL_OK;
}

void relay_terminal_state(struct rl_term *t, enum db_term_state s)
{
    struct relay *r = t->sb->r;
    if (t->state == s)
        return;
    if (relay_lease_owned(t->sb)) {
        int rc = db_terminal_set_state_fenced(r->cfg.db, t->id, s, t->sb->fence);
        if (relay_lease_checked(t->sb, rc) != AL_OK && rc != AL_E_PERM)
            relay_log(r, 0, "terminal %s: %s", t->id, db_errmsg(r->cfg.db));
    }
    t->state = s;
    if ((s == DB_TERM_EXITED || s == DB_TERM_CLOSED || s == DB_TERM_LOST) &&
        relay_lease_owned(t->sb))
        (void)relay_proxy_revoke(r, t->id);
}

void relay_terminal_exit(struct rl_term *t, int code, int signo)
{
    struct relay *r = t->sb->r;
    if (t->exited)
        return;
    t->exited = 1;
    t->exit_code = code;
    t->exit_signal = signo;
    if (relay_lease_owned(t->sb)) {
        int rc = db_terminal_set_exit_fenced(r->cfg.db, t->id, code, signo, t->sb->fence);
        if (relay_lease_checked(t->sb, rc) != AL_OK && rc != AL_E_PERM)
            relay_log(r, 0, "terminal %s: %s", t->id, db_errmsg(r->cfg.db));
    }
    t->state = DB_TERM_EXITED;
    if (relay_lease_owned(t->sb)) /* its process is gone: so is its credential */
        (void)relay_proxy_revoke(r, t->id);
    if (t->cast && !t->rec_failed) {
        int rc = cast_exit(t->cast, (int64_t)relay_now_us(), signo ? 128 + signo : code);
        if (rc != AL_OK && rc != AL_E_STATE)
            relay_output_rec_fail(t, rc);
    }
    relay_output_sync(t);
    relay_log(r, 1, "terminal %s exited (%s %d)", t->id, signo ? "signal" : "code",
              signo ? signo : code);
    relay_terminal_pump(t);
}

void relay_terminal_free(struct rl_term *t)
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
            relay_log(t->sb->r, 0, "terminal %s: closing the recording: %s", t->id,
                      al_strerror(rc));
    }
    for (unsigned s = 0; s < FR_NSTREAMS; s++)
        ring_free(&t->log[s]);
    free(t->snap);
    free(t->in);
    free(t);
}

/* Forget a terminal whose channel is gone (its clients are told). */
void relay_terminal_drop(struct rl_term *t, enum db_term_state final)
{
    struct rl_sbx *sb = t->sb;
    if (t->cast)
        relay_output_sync(t);
    if (final == DB_TERM_CLOSED && !t->exited && relay_lease_owned(sb)) /* killed by its close */
        (void)relay_lease_checked(
            sb, db_terminal_set_exit_fenced(sb->r->cfg.db, t->id, -1, 9, sb->fence));
    relay_terminal_state(t, final);
    for (struct rl_client *c = t->clients; c; c = c->next) {
        /* lost is not closed: a client says which (protocol.md §9) */
        if (c->ch && final == DB_TERM_LOST)
            (void)ep_send_error(c->ep, c->ch, FR_ERR_NO_CHANNEL, RL_LOST_MSG);
        if (c->ch)
            (void)ep_close(c->ep, c->ch);
        c->gone = 1;
        relay_wake(sb->r, c->conn);
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
    relay_terminal_free(t);
}

/*
 * The runner refused the last RESIZE (its screen budget): the terminal keeps
 * the size it had, so snapshots (made at that size) serve clients again;
 * the recording and the writer learn of it.
 */
void relay_terminal_resize_refused(struct rl_term *t, const uint8_t *msg, size_t len)
{
    struct relay *r = t->sb->r;
    relay_log(r, 1, "terminal %s: the runner refused a resize: %.*s", t->id, (int)len,
              (const char *)msg);
    if (!t->prev_cols || (t->prev_cols == t->cols && t->prev_rows == t->rows))
        return;
    t->cols = t->prev_cols;
    t->rows = t->prev_rows;
    if (t->cast && !t->rec_failed) {
        int e = cast_resize(t->cast, (int64_t)relay_now_us(), t->cols, t->rows);
        if (e != AL_OK && e != AL_E_STATE)
            relay_output_rec_fail(t, e);
    }
    if (t->writer && t->writer->ch && !t->writer->gone) {
        char m[AL_MAX_ERRMSG + 1];
        (void)snprintf(m, sizeof m, "%.*s", (int)len, (const char *)msg);
        (void)ep_send_error(t->writer->ep, t->writer->ch, FR_ERR_LIMIT, m);
        relay_wake(r, t->writer->conn);
    }
    relay_terminal_pump(t);
}

/* ---- input ---------------------------------------------------------------------- */

int relay_terminal_in_room(struct rl_term *t, size_t n)
{
    if (n > RL_IN_CAP - t->in_len)
        return AL_E_LIMIT;
    if (t->in_len + n <= t->in_cap)
        return AL_OK;
    size_t cap = t->in_cap ? t->in_cap : 1024;
    while (cap < t->in_len + n)
        cap *= 2;
    if (cap > RL_IN_CAP)
        cap = RL_IN_CAP;
    uint8_t *p = realloc(t->in, cap);
    if (!p)
        return AL_E_NOMEM;
    t->in = p;
    t->in_cap = cap;
    return AL_OK;
}

void relay_terminal_flush_input(struct rl_term *t)
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
                relay_output_rec_fail(t, rc);
        }
        r->bytes_in += (uint64_t)n;
        memmove(t->in, t->in + n, t->in_len - (size_t)n);
        t->in_len -= (size_t)n;
        if (credit) {
            t->in_owned -= credit;
            if (t->writer && t->writer->ch)
                (void)ep_consume(t->writer->ep, t->writer->ch, FR_STDIN, credit);
            if (t->writer)
                relay_wake(r, t->writer->conn);
        }
        relay_wake(r, t->sb->conn);
    }
    if (!t->in_len && t->in_cap > RL_IN_KEEP) {
        free(t->in); /* a paste's buffer: not kept for keystrokes */
        t->in = NULL;
        t->in_cap = 0;
    }
    if (!t->in_len && t->in_eof && !t->in_eof_sent && ep_eof(t->sb->ep, t->ch, FR_STDIN) == AL_OK) {
        t->in_eof_sent = 1;
        relay_wake(r, t->sb->conn);
    }
}

/* The terminal's merged input stream: where the next writer goes on. */
uint64_t relay_terminal_in_next(const struct rl_term *t)
{
    struct ep_stream_info si;
    memset(&si, 0, sizeof si);
    (void)ep_stream_info(t->sb->ep, t->ch, FR_STDIN, &si);
    return si.end + t->in_len;
}

/* ---- the clients and the timers ----------------------------------------------------- */

void relay_terminal_pump(struct rl_term *t)
{
    for (struct rl_client *c = t->clients; c; c = c->next)
        relay_client_pump(c);
}

void relay_terminal_tick(struct rl_term *t, uint64_t now)
{
    if (t->sync_due_us && now >= t->sync_due_us)
        relay_output_sync(t);
    if (t->snap_asked && now - t->snap_asked_us >= RL_SNAP_TIMEOUT_US)
        relay_output_snapshot_failed(t, "the runner did not answer in time");
    for (struct rl_client *c = t->clients; c; c = c->next)
        relay_client_tick(c, now);
}

/* ---- the API's actions -------------------------------------------------------- */

int relay_terminal_create(struct relay *r, const struct apireq_terminal *spec, const char *creator,
                          char *id_out, size_t cap, char *why, size_t why_cap)
{
    struct rl_sbx *sb = relay_sandbox(r, spec->sandbox);
    char owner[DB_REPLICA_ID_LEN + 8];
    if (db_name_valid(spec->sandbox) &&
        relay_sandbox_owner(r, spec->sandbox, owner, sizeof owner)) {
        al_errf(why, why_cap,
                "sandbox \"%s\" is served by replica %s, not this one, and it cannot be "
                "asked now: try again",
                spec->sandbox, owner);
        return AL_E_STATE;
    }
    struct db_sandbox *srow = sb ? malloc(sizeof *srow) : NULL;
    if (!sb || !srow || db_sandbox_get(r->cfg.db, sb->id, srow) != AL_OK) {
        free(srow);
        al_errf(why, why_cap, "no sandbox \"%s\"", spec->sandbox);
        return AL_E_NOENT;
    }
    /* input is recorded only where the sandbox allows it and the terminal wants it */
    bool record_input = srow->record_input && spec->record_input;
    free(srow);
    struct rl_proxy_env *px = NULL;
    int rc = relay_proxy_prepare(r, spec, sb, &px, why, why_cap);
    if (rc != AL_OK)
        return rc;
    struct fr_open *o = calloc(1, sizeof *o);
    if (!o) {
        relay_proxy_free(px);
        return AL_E_NOMEM;
    }
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
    /* the proxy's variables go to the runner only, never into the row */
    for (size_t i = 0; px && i < px->env.n; i++) {
        o->env[o->envc].p = px->env.vars[i];
        o->env[o->envc++].len = (uint16_t)strlen(px->env.vars[i]);
    }
    long ch = ep_open(sb->ep, o);
    free(o);
    if (ch < 0) {
        relay_proxy_free(px);
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
    rc = db_terminal_add(r->cfg.db, &ds, id_out, cap);
    if (rc != AL_OK)
        al_errf(why, why_cap, "%s", db_errmsg(r->cfg.db));
    if (rc == AL_OK && px && (rc = relay_proxy_bind(r, px, spec, id_out, why, why_cap)) != AL_OK)
        (void)db_terminal_set_state(r->cfg.db, id_out, DB_TERM_LOST); /* never opened */
    relay_proxy_free(px);
    if (rc != AL_OK) {
        (void)ep_close(sb->ep, (uint32_t)ch);
        return rc;
    }
    struct db_terminal *row = malloc(sizeof *row);
    if (rc == AL_OK && (!row || db_terminal_get(r->cfg.db, id_out, row) != AL_OK))
        rc = AL_E_NOMEM;
    struct rl_term *t = NULL;
    if (rc == AL_OK)
        rc = relay_terminal_new(sb, row, &t);
    free(row);
    if (rc != AL_OK) {
        al_errf(why, why_cap, "%s", db_errmsg(r->cfg.db));
        (void)ep_close(sb->ep, (uint32_t)ch);
        return rc;
    }
    relay_wake(r, sb->conn);
    relay_log(r, 1, "terminal %s opened on %s channel %ld", id_out, sb->id, ch);
    return AL_OK;
}

int relay_terminal_signal(struct relay *r, const char *id, unsigned signo)
{
    struct rl_term *t = relay_terminal_by_id(r, id);
    if (!t)
        return AL_E_NOENT;
    int rc = ep_signal(t->sb->ep, t->ch, (uint8_t)signo, FR_SIG_TREE);
    relay_wake(r, t->sb->conn);
    return rc;
}

int relay_terminal_resize(struct relay *r, const char *id, uint16_t cols, uint16_t rows)
{
    struct rl_term *t = relay_terminal_by_id(r, id);
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
            relay_output_rec_fail(t, e);
    }
    relay_wake(r, t->sb->conn);
    return AL_OK;
}

int relay_terminal_close(struct relay *r, const char *id)
{
    struct rl_term *t = relay_terminal_by_id(r, id);
    if (!t)
        return AL_E_NOENT;
    t->closing = 1;
    int rc = ep_close(t->sb->ep, t->ch);
    relay_wake(r, t->sb->conn);
    if (rc == AL_E_NOCHAN) {
        relay_terminal_drop(t, DB_TERM_CLOSED);
        return AL_OK;
    }
    return rc;
}

void relay_terminal_info(struct relay *r, const char *id, struct rl_term_info *out)
{
    memset(out, 0, sizeof *out);
    struct rl_term *t = relay_terminal_by_id(r, id);
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
    out->rec_bytes = (uint64_t)t->rec.size;
    out->rec_failed = t->rec_failed;
    (void)snprintf(out->rec_error, sizeof out->rec_error, "%s", t->rec_error);
}
