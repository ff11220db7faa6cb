/*
 * sesswatch: which open WebSockets each web session authenticated, and
 * when each of those sessions is next looked up; pure (no I/O, no clock:
 * the time is passed in, in ms of any monotonic clock). api_wsess.c is the
 * glue: it asks the database whether a due session still lives, and closes
 * the connections of one that ended (signed out, expired, its user gone).
 *
 * Why: a WebSocket is authenticated once, at its upgrade. Without this, a
 * terminal attached with a session cookie stays attached after its
 * session is signed out or expires, for as long as the socket lives.
 *
 * Data model: struct sesswatch is a fixed table of at most cap entries,
 * one per watched connection: the session's handle (db_session_handle:
 * hex SHA-256 of its secret, never the secret itself), the caller's
 * opaque connection pointer, and when its session is next due (ms). All
 * connections of one session are due together: one lookup serves them
 * all. A connection is watched once.
 */
#ifndef AL_SESSWATCH_H
#define AL_SESSWATCH_H

#include <stddef.h>
#include <stdint.h>

#define SESSWATCH_HANDLE_MAX 64 /* DB_SESSION_HANDLE_LEN */

struct sesswatch;

/* A table for cap connections, each session due every every_ms. AL_OK,
 * AL_E_INVAL (cap or every_ms 0), AL_E_NOMEM. */
int sesswatch_new(unsigned cap, uint64_t every_ms, struct sesswatch **out);
void sesswatch_free(struct sesswatch *w);

/* Watch conn, authenticated by the session of handle at now (so first due
 * at now + every_ms, or with the session's other connections if it has
 * some). AL_OK, AL_E_LIMIT (cap connections watched), AL_E_EXISTS (conn
 * is watched already), AL_E_INVAL (no conn, a handle empty or longer than
 * SESSWATCH_HANDLE_MAX). */
int sesswatch_add(struct sesswatch *w, const char *handle, void *conn, uint64_t now_ms);
/* Forget conn (it closed); nothing if it is not watched. */
void sesswatch_remove(struct sesswatch *w, void *conn);

/* The session due soonest, if it is due at now: AL_OK with its handle in
 * out (cap > SESSWATCH_HANDLE_MAX), and its connections then due again at
 * now + every_ms; AL_E_NOENT when none is due; AL_E_INVAL (no room). */
int sesswatch_due(struct sesswatch *w, uint64_t now_ms, char *out, size_t cap);

/* A session ended: each of its connections is forgotten, then handed to
 * fn (which may call sesswatch_remove; it is a no-op then). Returns how
 * many. */
typedef void sesswatch_fn(void *ud, void *conn);
unsigned sesswatch_end(struct sesswatch *w, const char *handle, sesswatch_fn *fn, void *ud);

/* Connections watched. */
unsigned sesswatch_count(const struct sesswatch *w);

#endif
