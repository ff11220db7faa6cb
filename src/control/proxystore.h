/*
 * proxystore: the credential proxy's store (proxy.h, struct proxy_store)
 * kept in airlockd's database: a credential's lookup is db_proxy_lookup
 * (a live credential of a live terminal that opens the upstream), a
 * terminal's sandbox is its row's (db_terminal_get), and
 * each call's record is one audit row (written at once, or handed to
 * airlockd's queue: proxystore_audit_fn), action "proxy_call", actor
 * "system", target the terminal ("" when the credential was not valid;
 * airlockd counts those instead: proxystore_refused_fn),
 * detail {"upstream", "method", "path" (without its query, at most
 * PROXYSTORE_PATH_SHOWN bytes), "status", "bytes_up", "bytes_down",
 * "latency_ms"}. Never a secret: the record holds none. Control plane only
 * (al_control).
 */
#ifndef AL_PROXYSTORE_H
#define AL_PROXYSTORE_H

#include "db.h"
#include "proxy.h"

enum {
    PROXYSTORE_PATH_SHOWN = 1024, /* bytes of a path an audit row keeps */
};

/* The store over db (borrowed: it must outlive the proxy). */
void proxystore_of_db(struct db *db, struct proxy_store *out);

/* Whether a terminal is confirmed to run now (airlockd: relay_proxy_live). */
typedef int proxystore_live_fn(void *ud, const char *terminal);
/* Where airlockd's store hands each call's audit row (db_audit_add's
 * arguments, borrowed for the call) to be written later: airlockd queues
 * it (api_audit_later: auditq.h, one transaction per flush). */
typedef void proxystore_audit_fn(void *ud, const char *actor, const char *action,
                                 const char *target, const char *detail_json);

/* Where airlockd's store hands a call made without a valid credential
 * (no terminal): counted in memory, one audit row per source and reason
 * per interval (api_audit_refused: auditagg.h), as the API's own
 * unauthenticated refusals are, so that an agent cannot write the audit
 * log a row per refused call (and push older rows out of its bound).
 * action "proxy_refused", why "HTTP <status>" ("cut" for 0), target the
 * path as sent (without its query). */
typedef void proxystore_refused_fn(void *ud, const char *source, const char *action,
                                   const char *why, const char *target);

/* A store over db whose credentials open their upstream only while
 * live(live_ud, terminal) says 1: a credential valid in the database whose
 * terminal is not confirmed is AL_E_AGAIN (503, try again). After a restart
 * the database still says "running" for a terminal that ended while
 * airlockd was down, until its runner links up again and says so. */
struct proxystore {
    struct db *db;
    proxystore_live_fn *live;
    void *live_ud;
    proxystore_audit_fn *audit;     /* NULL: each row written at once (db_audit_add) */
    proxystore_refused_fn *refused; /* NULL: a call with no terminal is a row too */
    void *audit_ud;                 /* of both */
};
/* The store over ps (borrowed, with what it points to: it must outlive the
 * proxy). */
void proxystore_of(struct proxystore *ps, struct proxy_store *out);

#endif
