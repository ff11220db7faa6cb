/*
 * cli_stdin: the attach session's local input (cli_stdin.c). Private to
 * the session's files (cli_session.h).
 */
#ifndef CLI_STDIN_H
#define CLI_STDIN_H

struct cli_session;

/* Poll stdin for reading, or stop (a no-op when it is not polled). */
void cli_stdin_poll(struct cli_session *a, int on);
/* Move held input into the endpoint, end stdin after it, and decide
 * whether to read more. */
void cli_stdin_pump(struct cli_session *a);

#endif
