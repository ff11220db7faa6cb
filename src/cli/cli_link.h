/*
 * cli_link: the attach session's connection to airlockd (cli_link.c).
 * Private to the session's files (cli_session.h).
 */
#ifndef CLI_LINK_H
#define CLI_LINK_H

struct cli_session;

/* Ask for a writable callback when linked: the endpoint has frames. */
void cli_link_want_write(struct cli_session *a);
/* Start a connection unless the session is over or one is under way; a
 * failure to start ends the session before the first link, and is
 * retried after one. */
void cli_link_connect(struct cli_session *a);

#endif
