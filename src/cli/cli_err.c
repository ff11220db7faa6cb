/*
 * cli_err: see cli_err.h.
 */
#include "cli_err.h"

#include <stdio.h>

#define HTTP_BAD_REQUEST 400
#define HTTP_UNAUTHORIZED 401
#define HTTP_FORBIDDEN 403
#define HTTP_NOT_FOUND 404
#define HTTP_CONFLICT 409
#define HTTP_TOO_MANY 429
#define HTTP_SERVER_ERROR 500

int cli_exit_of_status(unsigned status)
{
    switch (status) {
    case HTTP_UNAUTHORIZED:
        return CLI_EXIT_AUTH;
    case HTTP_FORBIDDEN:
        return CLI_EXIT_FORBIDDEN;
    case HTTP_NOT_FOUND:
        return CLI_EXIT_NOTFOUND;
    default:
        if (status >= HTTP_BAD_REQUEST && status < HTTP_SERVER_ERROR)
            return CLI_EXIT_REFUSED;
        return status >= HTTP_SERVER_ERROR ? CLI_EXIT_OTHER : CLI_EXIT_PROTO;
    }
}

const char *cli_status_hint(unsigned status)
{
    switch (status) {
    case HTTP_UNAUTHORIZED:
        return "the API key was not accepted (wrong, revoked or missing: see --key, "
               "AIRLOCK_API_KEY)";
    case HTTP_FORBIDDEN:
        return "the server understood the key, but its role may not do this";
    case HTTP_NOT_FOUND:
        return "not found";
    case HTTP_CONFLICT:
        return "conflict with the current state";
    case HTTP_TOO_MANY:
        return "too many (try again later)";
    default:
        if (status >= HTTP_SERVER_ERROR)
            return "the server failed";
        return "the request was refused";
    }
}

int cli_err_usage(const char *fmt, const char *arg)
{
    fputs("airlock: ", stderr);
    fprintf(stderr, fmt, arg ? arg : "");
    fputs(" (see airlock --help)\n", stderr);
    return CLI_EXIT_USAGE;
}
