/*
 * runner_listen: airlock-runner --listen HOST:PORT, where a platform's
 * ingress dials in: the listening socket (wslisten.c), the upgrade
 * decision (upgrade.c) and the plain HTTP answers. Every function returns
 * what lws wants from its callback unless said otherwise.
 */
#ifndef AL_RUNNER_LISTEN_H
#define AL_RUNNER_LISTEN_H

#include <libwebsockets.h>
#include <stdint.h>

#include "runner_app.h"

/* --listen's HOST:PORT into a; 0, or -1 after one line on stderr. */
int runner_listen_parse(struct runner_app *a);
/* Listen on the context's vhost; 0, or -1 after one line on stderr (the
 * context is destroyed). */
int runner_listen_start(struct runner_app *a);
/* The start-up line, which names the port the kernel chose for port 0. */
void runner_listen_announce(struct runner_app *a);

/* LWS_CALLBACK_HTTP_CONFIRM_UPGRADE: in is the upgrade's name. */
int runner_listen_upgrade(struct runner_app *a, struct lws *wsi, const void *in);
/* LWS_CALLBACK_HTTP: a plain request (a health check, or a refusal). */
int runner_listen_http(struct runner_app *a, struct lws *wsi);
/* LWS_CALLBACK_ESTABLISHED: the accepted token's expiry (Unix seconds). */
int64_t runner_listen_accepted(struct runner_app *a, struct lws *wsi);

#endif
