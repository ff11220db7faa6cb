/*
 * subproto: whether a WebSocket upgrade's Sec-WebSocket-Protocol offer lets
 * a server speak airlock.v1 (protocol.md §1), shared by the runner's
 * upgrade and airlockd's WebSocket endpoints, so that both refuse the same
 * offers with an HTTP status before anything is upgraded.
 */
#ifndef AL_SUBPROTO_H
#define AL_SUBPROTO_H

#include <stdbool.h>

/* offer: the header's value (lws joins repeated headers with ','), NULL or
 * "" when the request has none. True when there is no offer (the seed
 * request shape of managed platforms) or when AL_SUBPROTOCOL is one of its
 * comma-separated entries (exactly, case-sensitively, as RFC 6455 compares
 * tokens); false otherwise. */
bool subproto_acceptable(const char *offer);

#endif
