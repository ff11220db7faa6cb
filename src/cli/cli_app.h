/*
 * cli_app: one run of the airlock command (struct cli_app, no globals)
 * and airlockd's JSON API called through it. The commands (the table in
 * airlock_main.c) get it; the configuration, the libuv loop and the
 * network context are made on the first call that needs them, and
 * cli_app_free() undoes whatever was made.
 *
 * A failed call prints its one line on stderr ("airlock: ...") and
 * returns the exit code (cli_err.h) for the command to return.
 */
#ifndef CLI_APP_H
#define CLI_APP_H

#include <jansson.h>
#include <stddef.h>
#include <uv.h>

#include "cli_config.h"
#include "cli_net.h"

#define CLI_APP_ID_MAX 128 /* a terminal or sandbox id, NUL included */

struct cli_app {
    const char *flag_url, *flag_key; /* the global options; NULL when not given */
    int flag_insecure;
    struct cli_config cfg; /* loaded by cli_app_net() */
    uv_loop_t loop;
    int loop_ok;         /* loop initialised (cli_app_net(), or a replay of a file) */
    struct cli_net *net; /* NULL until cli_app_net() */
};

/* The configuration (flags, environment, file) and the network context,
 * once. CLI_EXIT_OK or the exit code (the reason printed). */
int cli_app_net(struct cli_app *a);
/* The network context freed, the loop's handles closed, the loop closed. */
void cli_app_free(struct cli_app *a);
/*
 * One call (what names it in messages; body JSON or NULL); answers up to
 * max bytes. On success (2xx) *out holds the parsed JSON (when out is not
 * NULL) or res->body. Otherwise a message is printed and the exit code
 * returned. The caller frees res->body.
 */
int cli_app_call(struct cli_app *a, const char *what, const char *method, const char *path,
                 json_t *body, size_t max, struct cli_http_result *res, json_t **out);
/* cli_app_call for a JSON answer of at most CLI_HTTP_MAX_BODY bytes. */
int cli_app_json(struct cli_app *a, const char *what, const char *method, const char *path,
                 json_t *body, json_t **out);
/* Whether id may go into a URL path: the server's alphabet, 1 to
 * CLI_APP_ID_MAX - 1 characters. */
int cli_app_id_ok(const char *id);
/* The string member k of o, or "" (absent, or not a string). */
const char *cli_app_str(json_t *o, const char *k);

#endif
