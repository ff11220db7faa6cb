/*
 * wslog: libwebsockets' own log lines, in our format and rate-limited.
 *
 * lws logs from inside its parser, once per event, whatever the peer: a
 * request whose headers overflow the buffer ("Ran out of header data
 * space") writes an error line each time, so a peer without any
 * credential could make a server write lines at the rate it sends
 * requests (tests/integration/abuse_requests.mjs found it: one line per
 * request, in lws's own format, beside our rate-limited refusals). Here
 * every lws line goes through al_vlog (one escaped line, our format, level
 * 0 for lws errors, 1 for the others) and at most one line per
 * WSLOG_INTERVAL_MS is written per lws level, with the count of the lines
 * it stands for.
 *
 * lws's log hook is process-wide and takes no context: the limiter's
 * state is the one static of this module, as lws's own log level is.
 */
#ifndef AL_WSLOG_H
#define AL_WSLOG_H

#define WSLOG_INTERVAL_MS 10000 /* one lws line per level per interval */

/* Send lws's lines of the levels in `levels` (LLL_*) to our log as program
 * prog, instance inst (both kept: static strings, or strings that live as
 * long as the process), in format (enum al_log_format). verbatim != 0:
 * no rate limit (AIRLOCK_LWS_DEBUG). */
void wslog_init(int levels, int format, const char *prog, const char *inst, int verbatim);

/* The line an lws line becomes (for tests): writes to out at most cap
 * bytes, NUL-terminated; returns 0 when the line is to be dropped (its
 * interval's line was written), else the count of lines it stands for. */
unsigned long wslog_filter(int level, const char *line, unsigned long long now_ms, char *out,
                           unsigned long cap);

#endif
