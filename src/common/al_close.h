/*
 * al_close: the one list of WebSocket close codes airlock.v1 uses
 * (docs/protocol.md §10), for every program and layer: the endpoint's
 * fatal errors (ep_closing), the glue's own closes (a replaced connection,
 * a maximum age) and the clients that read a close.
 *
 * AL_CLOSE_MAP(XX) is the table, one XX(name, code, meaning) per row, in
 * the order and with the words of protocol.md's close-code table (a unit
 * test holds the two equal); it generates enum al_close, AL_CLOSE_<name> =
 * code. 1000 and 1011 are RFC 6455's; 4000-4999 are private use.
 *
 * Not here: which ERROR code is followed by which close (the endpoint's
 * table, ep_close_code_of()), and how a close frame is written (wsg).
 * Header only: no code, so that every program may include it.
 */
#ifndef AL_CLOSE_H
#define AL_CLOSE_H

#define AL_CLOSE_MAP(XX)                                                                           \
    XX(NORMAL, 1000, "normal (a client detaching, a connection that reached its maximum age)")     \
    XX(INTERNAL, 1011, "the sender failed (ERROR `INTERNAL`)")                                     \
    XX(PROTOCOL, 4000, "protocol error (ERROR `PROTOCOL`, `UNKNOWN_TYPE`)")                        \
    XX(VERSION, 4001, "no common version (ERROR `VERSION`)")                                       \
    XX(TOKEN_EXPIRED, 4002, "token expired (ERROR `TOKEN_EXPIRED`)")                               \
    XX(IDLE, 4003, "idle timeout (ERROR `TIMEOUT`)")                                               \
    XX(LIMIT, 4004, "a limit was exceeded (ERROR `TOO_BIG`)")                                      \
    XX(REPLACED, 4005, "replaced by a newer connection")                                           \
    XX(SESSION_ENDED, 4401,                                                                        \
       "the credential that authenticated the connection ended (a web session signed out or "      \
       "expired, an API key whose user was removed)")

enum al_close {
#define AL_CLOSE_ENUM(name, code, meaning) AL_CLOSE_##name = (code),
    AL_CLOSE_MAP(AL_CLOSE_ENUM)
#undef AL_CLOSE_ENUM
};

#endif
