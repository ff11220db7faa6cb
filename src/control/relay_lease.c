/*
 * relay_lease: which sandboxes this replica serves (docs/scale-out.md,
 * "Leases"). Each sandbox's runner link is owned by one replica, recorded
 * in the database with a lease and a fence (db.h "Leases"); only the owner
 * dials a static or aca runner, starts a local one, keeps a runner's link
 * and writes about the sandbox, each write carrying its fence.
 *
 * At each heartbeat (api_replica.c) the replica renews all its leases in
 * one statement: a sandbox missing from the answer, or under another
 * fence, was taken by another replica and is given up (lost). Then it
 * takes every lease free for it in one statement (no owner, expired, or
 * an owner gone) and adopts those sandboxes: a fresh controller endpoint,
 * its live terminals from the database at their durable offsets (as a
 * restart does), and its runner dialed or started. A runner that dials
 * this replica for a sandbox another one owns moves the lease here
 * (relay_lease_claim): fronts do not follow redirects for WebSocket
 * upgrades, so the link is kept where it landed and the old owner is
 * fenced off.
 *
 * Giving up happens in two steps, because a fenced write may be refused
 * deep inside an endpoint's event: relay_lease_lost only marks the sandbox
 * (no more writes from then on, logged once), and relay_lease_tick, from
 * the relay's timer, closes its link (4005), stops its local runner and
 * forgets its terminals (recordings closed, clients told, nothing written).
 *
 * Data model: struct relay holds this replica's id and the lease's and
 * staleness's lengths (ms); each struct rl_sbx its owned flag, its fence
 * and the pending adoption or drop.
 */
#include "relay_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "endpoint.h"

int relay_lease_owned(const struct rl_sbx *sb)
{
    return sb->owned && !sb->drop_due;
}

void relay_lease_lost(struct rl_sbx *sb, const char *why)
{
    if (!sb->owned)
        return;
    sb->owned = 0;
    sb->adopt_due = 0;
    sb->drop_due = 1;
    relay_log(sb->r, 0, "sandbox %s: another replica owns it now (%s): giving it up", sb->id, why);
    relay_wake(sb->r, sb->conn);
}

int relay_lease_checked(struct rl_sbx *sb, int rc)
{
    if (rc == AL_E_PERM)
        relay_lease_lost(sb, db_errmsg(sb->r->cfg.db));
    return rc;
}

/* Forget sb's terminals: their clients are told the sandbox moved, their
 * recordings closed as they are, nothing written to the database. */
static void forget_terminals(struct rl_sbx *sb)
{
    while (sb->terms) {
        struct rl_term *t = sb->terms;
        sb->terms = t->next;
        for (struct rl_client *c = t->clients; c; c = c->next) {
            if (c->ch) {
                (void)ep_send_error(c->ep, c->ch, FR_ERR_NO_CHANNEL, RL_MOVED_MSG);
                (void)ep_close(c->ep, c->ch);
            }
            c->gone = 1;
            relay_wake(sb->r, c->conn);
        }
        struct rl_client *c = t->clients; /* they stay until their connections go */
        t->clients = NULL;
        while (c) {
            struct rl_client *n = c->next;
            c->next = NULL;
            c->t = NULL;
            c = n;
        }
        relay_terminal_free(t);
    }
}

/* A lost sandbox, given up: its link closed (relay_runner_closing says
 * so), its local runner stopped (else it would dial us back and move the
 * lease here again), its terminals forgotten. */
static void drop(struct rl_sbx *sb)
{
    sb->drop_due = 0;
    sb->redial_us = 0;
    sb->proc_check_us = 0;
    if (sb->pid > 1) /* its own session (detached): the whole group */
        (void)kill(-sb->pid, SIGTERM);
    forget_terminals(sb);
    relay_proxychan_free_all(sb);
    sb->up = 0;
    if (sb->conn && !sb->old_conn) { /* closed as replaced, whoever owns it next */
        sb->old_conn = sb->conn;
        sb->old_lost = 1;
        sb->conn = NULL;
    }
    relay_wake(sb->r, sb->conn);
    relay_wake(sb->r, sb->old_conn);
}

/* Adopt a sandbox just taken, once no link of an earlier ownership is
 * left: a fresh endpoint if the old one served, its terminals, its runner. */
static void adopt(struct rl_sbx *sb)
{
    if (sb->conn || sb->old_conn)
        return; /* the old link is still closing: at a later tick */
    sb->adopt_due = 0;
    if (sb->ep_used && relay_sandbox_ep(sb) != AL_OK) {
        relay_lease_lost(sb, "no memory for its endpoint");
        return;
    }
    sb->ep_used = 1;
    if (relay_sandbox_load_terminals(sb) != AL_OK)
        relay_log(sb->r, 0, "sandbox %s: loading its terminals: %s", sb->id,
                  db_errmsg(sb->r->cfg.db));
    relay_log(sb->r, 1, "sandbox %s: this replica owns it (fence %lld)", sb->id,
              (long long)sb->fence);
    relay_sandbox_start(sb);
}

void relay_lease_tick(struct rl_sbx *sb)
{
    if (sb->drop_due)
        drop(sb);
    if (sb->adopt_due && sb->owned && !sb->removed)
        adopt(sb);
}

/* sb is ours under fence from now on; adopted at the next tick (not
 * from inside a listing of the database). */
static void taken(struct rl_sbx *sb, int64_t fence)
{
    sb->owned = 1;
    sb->fence = fence;
    sb->adopt_due = 1;
}

/* A lease the database says is ours: renewed if it is the one we hold;
 * adopted if we hold none (a runner moved it here while we were giving an
 * earlier ownership up: else we would renew it forever without serving
 * it); under another fence it is not renewed, so lost below. */
static int renewed(void *ctx, const char *sandbox_id, int64_t fence)
{
    struct relay *r = ctx;
    struct rl_sbx *sb = relay_sandbox_known(r, sandbox_id);
    if (!sb)
        return 0;
    if (sb->owned && sb->fence == fence) {
        sb->renewed = 1;
    } else if (!sb->owned) {
        taken(sb, fence);
        sb->renewed = 1;
    }
    return 0;
}

struct rl_sbx *relay_sandbox_known(struct relay *r, const char *sandbox_id)
{
    struct rl_sbx *sb = relay_sandbox(r, sandbox_id);
    if (sb)
        return sb;
    if (!db_name_valid(sandbox_id))
        return NULL;
    struct db_sandbox *row = calloc(1, sizeof *row);
    if (row && db_sandbox_get(r->cfg.db, sandbox_id, row) == AL_OK &&
        relay_sandbox_new(r, row, &sb) == AL_OK) {
        free(row);
        return sb;
    }
    free(row);
    return NULL;
}

static int took(void *ctx, const char *sandbox_id, int64_t fence)
{
    struct relay *r = ctx;
    struct rl_sbx *sb = relay_sandbox_known(r, sandbox_id);
    if (!sb) {
        relay_log(r, 0, "sandbox %s: taken but cannot be loaded: %s", sandbox_id,
                  db_errmsg(r->cfg.db));
        return 0; /* its lease expires: another replica may do better */
    }
    taken(sb, fence);
    return 0;
}

int relay_lease_beat(struct relay *r)
{
    if (!r->replica_id[0])
        return AL_E_STATE;
    for (struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        sb->renewed = 0;
    if (relay_peers_refresh(r) != AL_OK) /* the other replicas' keys, with the beat */
        relay_log(r, 2, "reading the other replicas' public keys: %s", db_errmsg(r->cfg.db));
    int rc = db_lease_renew(r->cfg.db, r->replica_id, r->lease_ms, renewed, r);
    if (rc != AL_OK)
        return rc; /* the database is away: the leases may expire; writes are fenced */
    for (struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        if (sb->owned && !sb->renewed && !sb->removed)
            relay_lease_lost(sb, "its lease was taken, or the sandbox removed");
    /* a sandbox removed here is left to expire; the others may be taken */
    return db_lease_take_free(r->cfg.db, r->replica_id, r->stale_ms, r->lease_ms, took, r);
}

int relay_lease_start(struct relay *r, const char *replica_id, int64_t beat_ms, int64_t stale_ms)
{
    if (!replica_id || strlen(replica_id) != DB_REPLICA_ID_LEN || beat_ms < 1 || stale_ms < 1)
        return AL_E_INVAL;
    (void)snprintf(r->replica_id, sizeof r->replica_id, "%s", replica_id);
    r->lease_ms = beat_ms * RL_LEASE_BEATS;
    r->stale_ms = stale_ms;
    int rc = relay_peers_publish(r); /* before any token of ours leaves */
    if (rc == AL_OK)
        rc = relay_lease_beat(r);
    /* what the first beat took is adopted now, before the loop serves a
     * request: a client that reconnects at once after a restart finds its
     * terminal (at the next tick it got "no such live terminal") */
    for (struct rl_sbx *sb = r->sbxs; rc == AL_OK && sb; sb = sb->next)
        relay_lease_tick(sb);
    return rc;
}

int relay_lease_take(struct relay *r, struct rl_sbx *sb)
{
    if (!r->replica_id[0] || sb->owned)
        return AL_OK;
    int64_t fence = 0;
    int rc = db_lease_take(r->cfg.db, sb->id, r->replica_id, r->stale_ms, r->lease_ms, &fence);
    if (rc == AL_OK) {
        taken(sb, fence);
        relay_lease_tick(sb); /* started at once */
    }
    return rc;
}

int relay_lease_claim(struct relay *r, struct rl_sbx *sb, char *why, size_t cap)
{
    if (!r->replica_id[0]) {
        al_errf(why, cap, "this replica is starting; dial again");
        return AL_E_AGAIN;
    }
    if ((!sb->owned || sb->adopt_due) && (sb->conn || sb->old_conn || sb->drop_due)) {
        al_errf(why, cap, "this replica is still giving the sandbox up; dial again");
        return AL_E_AGAIN;
    }
    int64_t fence = 0;
    int rc = db_lease_move(r->cfg.db, sb->id, r->replica_id, r->lease_ms, &fence);
    if (rc != AL_OK) {
        al_errf(why, cap, "moving the sandbox's lease here: %s", db_errmsg(r->cfg.db));
        return rc;
    }
    if (sb->owned && fence == sb->fence) {
        relay_lease_tick(sb); /* ours already; adopted now if it was due */
        return AL_OK;
    }
    if (sb->owned) { /* moved away and back meanwhile: what we hold is stale */
        relay_lease_lost(sb, "its fence moved on");
        al_errf(why, cap, "this replica is still giving the sandbox up; dial again");
        return AL_E_AGAIN;
    }
    relay_log(r, 1, "sandbox %s: its runner dialed this replica: the lease moves here", sb->id);
    taken(sb, fence);
    relay_lease_tick(sb); /* adopted before the link comes up */
    return AL_OK;
}

void relay_lease_release(struct relay *r)
{
    if (!r->replica_id[0])
        return;
    if (db_lease_release(r->cfg.db, r->replica_id) != AL_OK)
        relay_log(r, 0, "releasing this replica's leases: %s", db_errmsg(r->cfg.db));
}

const char *relay_sandbox_owner(const struct relay *r, const char *id, char *buf, size_t cap)
{
    for (const struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        if (!strcmp(sb->id, id) && !sb->removed && relay_lease_owned(sb))
            return NULL;
    struct db_sandbox *row = calloc(1, sizeof *row);
    int rc = row ? db_sandbox_get(r->cfg.db, id, row) : AL_E_NOMEM;
    if (rc == AL_OK)
        (void)snprintf(buf, cap, "%s", row->owner[0] ? row->owner : "none");
    free(row);
    return rc == AL_OK ? buf : NULL; /* no such sandbox: the caller says so */
}
