/*
 * connlim: which connections a server admits, as a pure table (no I/O, the
 * time passed in), shared by airlockd and airlock-runner --listen.
 *
 * A server asks clim_admit() for every accepted socket, before any byte of
 * it is read: refused when the server already holds max_total connections
 * or the peer's address holds max_per_ip. An admitted connection has a
 * deadline (its request, headers and body, must be answered by then); the
 * server clears it once the request is answered or upgraded, and closes
 * every connection clim_expired() lists.
 *
 * Data model: a fixed array of max_total slots, each one connection: the
 * key the server knows it by (its struct lws *), the peer's address as
 * text, and a deadline in ms (0: none). Counts are kept per slot, so a
 * lookup scans at most max_total slots.
 */
#ifndef AL_CONNLIM_H
#define AL_CONNLIM_H

#include <stddef.h>
#include <stdint.h>

#define CLIM_ADDR_MAX 64 /* bytes of a peer address as text, with its NUL */

struct clim_limits {
    unsigned max_total;   /* connections at once, all peers together */
    unsigned max_per_ip;  /* connections at once from one address */
    uint64_t deadline_ms; /* to finish a request, from accept or from the last answer */
};

enum clim_verdict {
    CLIM_ADMITTED = 0,
    CLIM_FULL = 1,   /* the server holds max_total connections */
    CLIM_PER_IP = 2, /* this address holds max_per_ip connections */
};

struct clim;

/* AL_OK, AL_E_INVAL (a zero limit), AL_E_NOMEM. */
int clim_new(const struct clim_limits *lim, struct clim **out);
void clim_free(struct clim *t);

/* Admit a connection from addr at now_ms: CLIM_ADMITTED and *slot, or the
 * reason it is refused. The slot has no key until clim_bind(). */
enum clim_verdict clim_admit(struct clim *t, const char *addr, uint64_t now_ms, int *slot);
/* Give an admitted slot its key (a connection of the server's). */
void clim_bind(struct clim *t, int slot, const void *key);
/* Free a slot (the connection could not be handed on). */
void clim_release_slot(struct clim *t, int slot);
/* The connection key is gone: free its slot. 0, or -1 if it had none. */
int clim_release(struct clim *t, const void *key);
/* Set key's deadline (0: none; else an absolute time in ms). */
void clim_set_deadline(struct clim *t, const void *key, uint64_t at_ms);
/* Up to cap keys whose deadline is at or before now_ms; their deadlines
 * are cleared, so each is listed once. Returns how many. */
size_t clim_expired(struct clim *t, uint64_t now_ms, const void **keys, size_t cap);

unsigned clim_count(const struct clim *t);
unsigned clim_count_addr(const struct clim *t, const char *addr);
const struct clim_limits *clim_limits_of(const struct clim *t);
const char *clim_verdict_text(enum clim_verdict v);

#endif
