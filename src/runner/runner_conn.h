/*
 * runner_conn: one connection of airlock-runner, either direction (it
 * listened or it dialed): the lws protocol with its one callback, which
 * moves whole binary messages between the socket and runner.c.
 */
#ifndef AL_RUNNER_CONN_H
#define AL_RUNNER_CONN_H

#include <libwebsockets.h>

#include "runner_app.h"

/* airlock.v1 and the terminating entry, for the lws context. */
extern const struct lws_protocols runner_conn_protocols[];

/* The current connection reached --max-age: close it so that we redial. */
void runner_conn_max_age(struct runner_app *a);

#endif
