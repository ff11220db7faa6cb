/*
 * relay_sandbox: the relay's sandboxes (struct rl_sbx, relay_int.h), one
 * per row of the database: made at start or when the API adds one, looked
 * up by id, marked removed (its link and runner then go), and ticked.
 * Which network a local sandbox's agents get is decided here.
 *
 * Not here: the link to the runner (relay_runner.c), the local runner's
 * process (relay_spawn.c), the terminals (relay_terminal.c).
 */
#include "al_version.h"
#include "relay_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "endpoint.h"
#include "platform.h"

int relay_sandbox_new(struct relay *r, const struct db_sandbox *row, struct rl_sbx **out)
{
    struct rl_sbx *sb = calloc(1, sizeof *sb);
    if (!sb)
        return AL_E_NOMEM;
    sb->r = r;
    (void)snprintf(sb->id, sizeof sb->id, "%s", row->id);
    (void)snprintf(sb->url, sizeof sb->url, "%s", row->url);
    (void)snprintf(sb->platform, sizeof sb->platform, "%s", row->platform);
    (void)snprintf(sb->ident, sizeof sb->ident, "%s", row->identifier);
    sb->kind = row->kind;
    backoff_init(&sb->redial, RL_REDIAL_MIN_MS, RL_REDIAL_MAX_MS);
    sb->network = row->network;
    sb->rtt_us = -1;
    sb->fence = DB_NO_FENCE;
    int rc = relay_sandbox_ep(sb);
    if (rc != AL_OK) {
        free(sb);
        return rc;
    }
    sb->next = r->sbxs;
    r->sbxs = sb;
    *out = sb;
    return AL_OK;
}

int relay_sandbox_ep(struct rl_sbx *sb)
{
    struct relay *r = sb->r;
    struct ep_config ec;
    ep_config_default(&ec, FR_ROLE_CONTROLLER);
    char name[AL_VERSION_NAME_MAX];
    ec.name = al_version_name("airlockd", name, sizeof name);
    ec.tx_ring = RL_RUNNER_WINDOW;
    ec.window = RL_RUNNER_WINDOW;
    ec.on_event = relay_runner_event;
    ec.ud = sb;
    ec.serves_proxy = r->cfg.proxy != NULL; /* its runner's proxy channels */
    struct ep *ep = NULL;
    int rc = ep_new(&ec, &ep);
    if (rc != AL_OK)
        return rc;
    ep_free(sb->ep);
    sb->ep = ep;
    relay_link_timers(r, sb->ep);
    /* behind a platform's front: pings as often as its idle cut wants, if
     * more often than every link's */
    const struct platform_def *pd =
        sb->kind == DB_SANDBOX_ACA ? platform_find(r->cfg.platforms, sb->platform) : NULL;
    uint64_t ping_us = r->cfg.ping_us ? r->cfg.ping_us : EP_DEFAULT_PING_US;
    if (pd && (uint64_t)pd->ping_s * 1000000u < ping_us)
        ep_set_timers(sb->ep, (uint64_t)pd->ping_s * 1000000u,
                      r->cfg.idle_us ? r->cfg.idle_us : EP_DEFAULT_IDLE_US);
    return AL_OK;
}

struct rl_sbx *relay_sandbox(struct relay *r, const char *id)
{
    for (struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        if (!strcmp(sb->id, id) && !sb->removed)
            return sb;
    return NULL;
}

const char *relay_sandbox_link_error(const struct relay *r, const char *id)
{
    for (const struct rl_sbx *sb = r->sbxs; sb; sb = sb->next)
        if (!strcmp(sb->id, id) && !sb->removed)
            return sb->link_error[0] ? sb->link_error : NULL;
    return NULL;
}

void relay_sandbox_refused(const struct relay *r, const char *id, uint64_t *count, int64_t *last_ms)
{
    *count = 0;
    *last_ms = 0;
    for (const struct rl_sbx *sb = r->sbxs; sb; sb = sb->next) {
        if (!strcmp(sb->id, id) && !sb->removed) {
            *count = sb->refused_links;
            *last_ms = sb->refused_at_ms;
            return;
        }
    }
}

enum db_sandbox_network relay_sandbox_network(const struct relay *r, enum db_sandbox_network n)
{
    if (n == DB_NETWORK_DEFAULT)
        return r->cfg.no_network ? DB_NETWORK_NONE : DB_NETWORK_HOST;
    return n == DB_NETWORK_NONE ? DB_NETWORK_NONE : DB_NETWORK_HOST;
}

void relay_sandbox_start(struct rl_sbx *sb)
{
    if (sb->kind == DB_SANDBOX_LOCAL) {
        sb->proc_check_us = 1; /* at the next tick */
    } else if (sb->kind == DB_SANDBOX_STATIC || sb->kind == DB_SANDBOX_ACA) {
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
    rc = relay_sandbox_new(r, &row, &sb);
    if (rc != AL_OK) {
        al_errf(why, cap, "%s", al_strerror(rc));
        return rc;
    }
    /* added here: this replica takes its lease at once (and starts it) */
    if (relay_lease_take(r, sb) != AL_OK)
        relay_log(r, 1, "sandbox %s: %s", id, db_errmsg(r->cfg.db));
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
    relay_wake(r, sb->conn);
}

void relay_sandbox_tick(struct rl_sbx *sb, uint64_t now)
{
    relay_lease_tick(sb);
    relay_runner_tick(sb, now);
    relay_spawn_tick(sb, now);
    relay_proxychan_tick(sb, now);
    for (struct rl_term *t = sb->terms; t; t = t->next)
        relay_terminal_tick(t, now);
}
