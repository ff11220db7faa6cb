/*
 * airlockd_conf: what `airlockd serve` is given, as text, from its flags
 * and then from a --config file for what the flags left unset. One table
 * names every setting once: the flag "--NAME" and the config key "NAME"
 * (airlockd_serve.c checks the values).
 *
 * A config file: "key = value" lines, '#' comments, at most
 * AIRLOCKD_CONF_MAX bytes. Its "upstream.NAME.FIELD" lines are the
 * credential proxy's (docs/proxy.md): they go to a proxycfg, which checks
 * each one as it comes; its "platform.NAME.FIELD" lines name the platforms
 * of aca sandboxes (docs/aca.md) and go to a struct platforms. Neither has
 * a flag.
 */
#ifndef AL_AIRLOCKD_CONF_H
#define AL_AIRLOCKD_CONF_H

#include <stddef.h>

#include "airlockd_cmd.h"
#include "platform.h"
#include "proxycfg.h"

#define AIRLOCKD_CONF_MAX 16384 /* bytes of a --config file */
#define AIRLOCKD_CONF_KEYS 28   /* settings in the table */

/* Each a string, NULL while unset; they point into argv or the store
 * airlockd_conf_read was given. */
struct airlockd_conf {
    const char *data, *db, *listen, *runner, *log_level, *log_format, *tls_cert, *tls_key, *web;
    const char *no_bwrap;
    /* limits (api.h): whole numbers, unset = the default */
    const char *max_conns, *max_conns_per_ip, *request_timeout, *audit_keep_days, *audit_keep_rows;
    const char *sbx_user, *sbx_network, *sbx_memory, *sbx_pids, *sbx_cpu;
    const char *session_ttl, *session_idle;
    const char *ping_interval, *idle_timeout; /* every airlock.v1 link's, seconds */
    const char *proxy_listen;                 /* the credential proxy's direct path, ADDR:PORT */
    const char *proxy_path;      /* "runner" (default) or "direct": which path terminals get */
    const char *advertise;       /* the address other replicas reach this one at */
    const char *recordings;      /* the recordings' directory (shared by replicas) */
    struct proxycfg *proxy;      /* where upstream.* lines go (the caller's) */
    struct platforms *platforms; /* where platform.* lines go (the caller's) */
};

/* The flags taking a value, bound to c's fields, into opts (room for
 * AIRLOCKD_CONF_KEYS): every setting but no-bwrap, which on the command
 * line is a flag without value. Returns how many. */
size_t airlockd_conf_opts(struct airlockd_conf *c, struct airlockd_opt *opts);

/* The file at path: fills what is still NULL in c; values live in store
 * (cap bytes, at least AIRLOCKD_CONF_MAX). 0, or AIRLOCKD_RC_FAIL /
 * AIRLOCKD_RC_USAGE after the error line. */
int airlockd_conf_read(const char *path, struct airlockd_conf *c, char *store, size_t cap);

#endif
