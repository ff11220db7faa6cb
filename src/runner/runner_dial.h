/*
 * runner_dial: airlock-runner --connect URL, where the runner dials the
 * control plane: the URL, the token (the file's, re-read per attempt, or a
 * newer one handed over in band) and the link key presented, redials with
 * backoff and jitter, --max-age.
 */
#ifndef AL_RUNNER_DIAL_H
#define AL_RUNNER_DIAL_H

#include <libwebsockets.h>

#include "runner_app.h"
#include "wsc.h"

/* Our link key: from --link-key-fd (read once, closed), or random. 0, or
 * -1 after one line on stderr. */
int runner_dial_load_key(struct runner_app *a);
/* --connect's URL checked and cut up, the backoff set; 0, or -1 after one
 * line on stderr. */
int runner_dial_setup(struct runner_app *a);
/* Dial now (or schedule a redial if no token is usable). */
void runner_dial_start(struct runner_app *a);

/* The dialed connection's events, from runner_conn.c's callback. */
void runner_dial_connected(struct runner_app *a);
void runner_dial_failed(struct runner_app *a, struct lws *wsi, const void *in);
void runner_dial_closed(struct runner_app *a, int was_current, int aged);
/* A dial (an lws RAW socket, runner_conn.c): the link with our
 * upgrade request, token and key; NULL if it cannot be made. */
struct wsc *runner_dial_link(struct runner_app *a, const struct wsc_events *ev, void *ud);
/* A dial failed before or at its upgrade: logged as the lws dial's
 * failures are (status 0: no HTTP status came), and redialed later. */
void runner_dial_refused(struct runner_app *a, unsigned status, const char *why);

#endif
