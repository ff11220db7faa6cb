/*
 * cli_config: where the server is and which API key to use.
 *
 * Sources, the first that gives a value wins: command-line flags, the
 * environment (AIRLOCK_URL, AIRLOCK_API_KEY), then the file
 * $XDG_CONFIG_HOME/airlock/config or ~/.config/airlock/config, whose lines
 * are "url=..." and "key=..." ('#' starts a comment, blanks ignored).
 * The URL is http://HOST[:PORT][/PREFIX] or https://...; the CLI derives
 * the WebSocket address from it.
 */
#ifndef CLI_CONFIG_H
#define CLI_CONFIG_H

#include <stddef.h>

enum {
    CLI_URL_MAX = 1024,
    CLI_KEY_MAX = 512,
    CLI_HOST_MAX = 256,
    CLI_CONFIG_FILE_MAX = 64 * 1024, /* bytes read from the config file */
    CLI_HEADERS_MAX = 16,            /* extra request headers (probe --header) */
    CLI_HEADER_MAX = 4200,           /* one "Name: value" */
    CLI_HEADER_NAME_MAX = 64,        /* a header's name */
    CLI_PATH_MAX = 1024,             /* a file's path (--cacert) */
};

struct cli_config {
    char url[CLI_URL_MAX];
    char key[CLI_KEY_MAX]; /* "" when none was given */
    char host[CLI_HOST_MAX];
    int port;
    int tls;
    char prefix[CLI_URL_MAX]; /* path prefix without a trailing '/', or "" */
    int insecure;             /* https: accept any certificate (--insecure) */
    /* set by commands that need them (airlock probe ws://...), else empty */
    char token_header[CLI_HEADER_NAME_MAX + 1];    /* the key's header: "" is Authorization */
    char headers[CLI_HEADERS_MAX][CLI_HEADER_MAX]; /* "Name: value" on every request */
    int nheaders;
    char cacert[CLI_PATH_MAX]; /* PEM CAs for TLS instead of the system's store, or "" */
};

/*
 * Resolve the configuration. flag_url/flag_key may be NULL. AL_OK,
 * AL_E_INVAL (no URL anywhere, a bad URL or a bad file line: why says
 * which), AL_E_IO (the file exists but cannot be read).
 */
int cli_config_load(struct cli_config *c, const char *flag_url, const char *flag_key, char *why,
                    size_t cap);

/* Parse a URL into c->host/port/tls/prefix (c->url is set too). */
int cli_config_parse_url(struct cli_config *c, const char *url, char *why, size_t cap);

#endif
