/*
 * relay: airlockd's live state (relay.h). This file holds struct relay
 * itself: loading the sandboxes and live terminals from the database at
 * start, freeing them, the tick that drives every timer and the deadline
 * of the next one, the metrics; and the helpers every relay file uses
 * (logging, the audit, waking a connection, paths in the data directory).
 *
 * Not here: what a sandbox, a link, a terminal or a client does (the other
 * relay_*.c files: relay_int.h maps them).
 */
#include "relay_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "al_err.h"
#include "al_log.h"
#include "endpoint.h"
#include "keys.h"
#include "lsbx.h"
#include "token.h"

/* ---- helpers for the relay's files ------------------------------------------- */

void relay_log(const struct relay *r, int level, const char *fmt, ...)
{
    if (level > r->cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    al_vlog(r->cfg.log_format, "airlockd", "relay", level, fmt, ap);
    va_end(ap);
}

uint64_t relay_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int64_t relay_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void relay_audit(struct relay *r, const char *actor, const char *action, const char *target,
                 const char *detail)
{
    if (db_audit_add(r->cfg.db, 0, actor, action, target, detail) != AL_OK)
        relay_log(r, 0, "audit %s: %s", action, db_errmsg(r->cfg.db));
}

void relay_audit_sbx(struct rl_sbx *sb, const char *actor, const char *action, const char *target,
                     const char *detail)
{
    struct relay *r = sb->r;
    if (!relay_lease_owned(sb))
        return; /* not ours (any more): the owner writes about it */
    int rc = db_audit_add_fenced(r->cfg.db, sb->id, sb->fence, 0, actor, action, target, detail);
    if (relay_lease_checked(sb, rc) != AL_OK && rc != AL_E_PERM)
        relay_log(r, 0, "audit %s: %s", action, db_errmsg(r->cfg.db));
}

void relay_wake(struct relay *r, void *conn)
{
    if (conn && r->cfg.wake)
        r->cfg.wake(conn);
}

void relay_link_timers(const struct relay *r, struct ep *ep)
{
    ep_set_timers(ep, r->cfg.ping_us ? r->cfg.ping_us : EP_DEFAULT_PING_US,
                  r->cfg.idle_us ? r->cfg.idle_us : EP_DEFAULT_IDLE_US);
}

int relay_path(const struct relay *r, char *out, size_t cap, const char *fmt, ...)
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

/* ---- counters ---------------------------------------------------------------- */

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

void relay_tick(struct relay *r, uint64_t now_us)
{
    for (struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        relay_sandbox_tick(sb, now_us);
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
        d = min_u64(d, relay_proxychan_deadline(sb));
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

/* Known, not started: a sandbox is started once its lease is ours
 * (relay_lease.c), its terminals loaded then. */
static int load_sandbox(void *ctx, const struct db_sandbox *row)
{
    struct relay *r = ctx;
    struct rl_sbx *sb;
    return relay_sandbox_new(r, row, &sb);
}

static int load_terminal(void *ctx, const struct db_terminal *row)
{
    struct rl_sbx *sb = ctx;
    struct relay *r = sb->r;
    if (row->state == DB_TERM_CLOSED || row->state == DB_TERM_LOST ||
        relay_terminal_by_id(r, row->id))
        return 0;
    struct rl_term *t;
    int rc = relay_terminal_new(sb, row, &t);
    if (rc != AL_OK)
        return rc;
    rc = ep_adopt(sb->ep, t->ch, t->mode, row->out_offset, row->err_offset);
    if (rc != AL_OK)
        relay_log(r, 0, "terminal %s: cannot adopt channel %u: %s", t->id, t->ch, al_strerror(rc));
    else
        relay_log(r, 1, "terminal %s: resuming at output offset %llu", t->id,
                  (unsigned long long)row->out_offset);
    return 0;
}

int relay_new(const struct relay_config *cfg, struct relay **out, char *err, size_t cap)
{
    if (!cfg->rec_dir) {
        al_errf(err, cap, "no recordings directory");
        return AL_E_INVAL;
    }
    struct relay *r = calloc(1, sizeof *r);
    if (!r)
        return AL_E_NOMEM;
    r->cfg = *cfg;
    char path[RL_PATH_MAX], why[256];
    int rc = relay_path(r, path, sizeof path, "%s", KEYS_JWKS_FILE);
    if (rc == AL_OK)
        rc = tok_keyset_from_file(path, &r->keys, why, sizeof why);
    if (rc != AL_OK) {
        al_errf(err, cap, "public keys %s: %s", path, why);
        free(r);
        return rc;
    }
    rc = db_sandbox_list(cfg->db, load_sandbox, r);
    if (rc == AL_OK)
        rc = relay_proxy_start(r);
    if (rc != AL_OK) {
        al_errf(err, cap, "loading state: %s", db_errmsg(cfg->db));
        relay_free(r);
        return rc;
    }
    *out = r;
    return AL_OK;
}

int relay_sandbox_load_terminals(struct rl_sbx *sb)
{
    return db_terminal_list(sb->r->cfg.db, sb->id, load_terminal, sb);
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
                relay_output_sync(t);
            relay_terminal_free(t);
        }
        relay_proxychan_free_all(sb); /* before the proxy goes */
        if (sb->proc) {               /* the runner keeps running: airlockd relinks on start */
            lsbx_proc_forget(sb->proc);
            sb->proc = NULL;
        }
        ep_free(sb->ep);
        free(sb);
    }
    tok_keyset_free(r->keys);
    relay_peers_free(r);
    free(r);
}
