/*
 * cli_kill: see cli_kill.h.
 */
#include "cli_kill.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli_app.h"
#include "cli_err.h"

int cli_kill_cmd(struct cli_app *a, int argc, char **argv)
{
    const char *id = NULL, *sig = "TERM";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--signal") && i + 1 < argc)
            sig = argv[++i];
        else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else
            return cli_err_usage("kill: unexpected argument %s", argv[i]);
    }
    if (!id || !cli_app_id_ok(id))
        return cli_err_usage("kill: give a terminal id%s", "");
    if (!strncmp(sig, "SIG", 3))
        sig += 3;
    char path[256];
    (void)snprintf(path, sizeof path, "/v1/terminals/%s/kill", id);
    json_t *body = json_pack("{s:s}", "signal", sig);
    int rc = cli_app_json(a, "kill", "POST", path, body, NULL);
    json_decref(body);
    if (rc == CLI_EXIT_OK)
        printf("sent %s to %s\n", sig, id);
    return rc;
}
