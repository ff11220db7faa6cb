/*
 * api_replica: this airlockd as one replica of those serving its database
 * (docs/scale-out.md, "Replicas"): registered at start under an id that is
 * random for each start of the process, its heartbeat renewed every
 * API_REPLICA_BEAT_MS by a libuv timer, marked stopped by a clean stop;
 * and GET /v1/replicas (admin), every replica with whether it is alive and
 * which one is this (self).
 *
 * Data model: struct api holds the id (replica_id), the address other
 * replicas reach this one at (advertise: --advertise, else the address
 * local runners dial back, api->self_url) and the timer (beat). The
 * database holds the rows and reads its own clock for every time in them
 * (db.h "Replicas"): alive is decided there, so replicas' clocks do not
 * matter. A replica is gone once its beat is API_REPLICA_STALE_BEATS
 * intervals old; its row is deleted after API_REPLICA_KEEP_MS.
 *
 * Why a random id and not one derived from the data directory: a copied
 * data directory (or two processes given the same one by mistake) must not
 * make two replicas one row, and a restart is a new incarnation that the
 * next slice's leases must tell from the old one (a lease held by a
 * process that died is not held by its successor).
 */
#include <stdio.h>
#include <string.h>

#include "al_err.h"
#include "api_local.h"
#include "db.h"
#include "relay.h"

_Static_assert(API_REPLICA_KEEP_MS > API_REPLICA_STALE_MS, "a gone replica is listed a while");

/* One beat, and the deletion of long-gone rows; a failure is logged once
 * until a beat succeeds again (the database may be away for a while). */
static int beat_once(struct api *a)
{
    int rc = db_replica_beat(a->db, a->replica_id, a->advertise);
    if (rc == AL_OK)
        rc = db_replica_prune(a->db, API_REPLICA_KEEP_MS);
    /* the leases ride on the beat: renewed, lost ones given up, free ones taken */
    if (rc == AL_OK && a->beat_on)
        rc = relay_lease_beat(a->relay);
    if (rc == AL_OK)
        api_hop_check(a); /* relayed clients whose owner changed are cut */
    if (rc != AL_OK && !a->beat_failing)
        api_log(a, 0, "replica %s: heartbeat: %s", a->replica_id, db_errmsg(a->db));
    else if (rc == AL_OK && a->beat_failing)
        api_log(a, 1, "replica %s: heartbeat again", a->replica_id);
    a->beat_failing = rc != AL_OK;
    return rc;
}

static void on_beat(uv_timer_t *h)
{
    (void)beat_once(h->data);
}

int api_replica_start(struct api *a, char *err, size_t cap)
{
    const char *addr = a->cfg.advertise ? a->cfg.advertise : a->self_url;
    int n = snprintf(a->advertise, sizeof a->advertise, "%s", addr);
    if (n < 0 || (size_t)n >= sizeof a->advertise || !db_replica_address_valid(a->advertise)) {
        al_errf(err, cap, "--advertise wants a ws:// or wss:// URL of at most %d characters",
                DB_REPLICA_ADDR_MAX);
        return AL_E_INVAL;
    }
    int rc = db_replica_new_id(a->db, a->replica_id, sizeof a->replica_id);
    if (rc == AL_OK && (rc = beat_once(a)) == AL_OK &&
        (rc = relay_lease_start(a->relay, a->replica_id, API_REPLICA_BEAT_MS,
                                API_REPLICA_STALE_MS)) == AL_OK) {
        (void)uv_timer_init(a->loop, &a->beat);
        a->beat.data = a;
        a->beat_on = 1;
        (void)uv_timer_start(&a->beat, on_beat, API_REPLICA_BEAT_MS, API_REPLICA_BEAT_MS);
        api_log(a, 1, "replica %s registered, reached at %s", a->replica_id, a->advertise);
    }
    if (rc != AL_OK)
        al_errf(err, cap, "registering this replica: %s", db_errmsg(a->db));
    return rc;
}

void api_replica_stop(struct api *a)
{
    if (!a->beat_on)
        return;
    a->beat_on = 0;
    (void)uv_timer_stop(&a->beat);
    uv_close((uv_handle_t *)&a->beat, NULL);
    relay_lease_release(a->relay); /* free for the others at once */
    if (db_replica_stop(a->db, a->replica_id) != AL_OK)
        api_log(a, 0, "replica %s: marking it stopped: %s", a->replica_id, db_errmsg(a->db));
    else
        api_log(a, 1, "replica %s stopped", a->replica_id);
}

static int add_replica(void *ctx, const struct db_replica *r)
{
    struct api_list *l = ctx;
    json_t *stopped = r->stopped_at ? json_integer(r->stopped_at) : json_null();
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:o, s:b, s:b}", "id", r->id, "address", r->address,
                          "started_at", (json_int_t)r->started_at, "beat_at",
                          (json_int_t)r->beat_at, "stopped_at", stopped, "alive", r->alive, "self",
                          !strcmp(r->id, l->a->replica_id));
    return o && json_array_append_new(l->arr, o) == 0 ? 0 : AL_E_NOMEM;
}

int api_replica_list(struct api *a, struct lws *wsi, struct call *c)
{
    struct api_list l = {a, json_array(), 0};
    if (!l.arr)
        return api_reply_error(wsi, 500, "out of memory");
    return api_reply_list(a, wsi, c, &l,
                          db_replica_list(a->db, API_REPLICA_STALE_MS, add_replica, &l));
}

/* ---- another replica's address -------------------------------------------------- */

struct addr_of {
    const char *id;
    char *addr;
    size_t cap;
    int found, alive;
};

static int addr_row(void *ctx, const struct db_replica *r)
{
    struct addr_of *o = ctx;
    if (strcmp(r->id, o->id) != 0)
        return 0;
    (void)snprintf(o->addr, o->cap, "%s", r->address);
    o->found = 1;
    o->alive = r->alive;
    return 1; /* found: the listing stops */
}

int api_replica_address(struct api *a, const char *id, int64_t late_ms, char *addr, size_t cap)
{
    struct addr_of o = {id, addr, cap, 0, 0};
    int rc = db_replica_list(a->db, late_ms, addr_row, &o);
    if (rc != AL_OK && rc != 1)
        return rc;
    return o.found && o.alive ? AL_OK : AL_E_NOENT;
}
