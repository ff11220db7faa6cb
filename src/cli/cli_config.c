/*
 * cli_config: see cli_config.h. The file is read whole (at most
 * CLI_CONFIG_FILE_MAX bytes) and parsed line by line; values are copied
 * into the fixed buffers of struct cli_config, too long ones refused.
 */
#include "cli_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_err.h"

#define HTTP_PORT 80
#define HTTPS_PORT 443
#define MAX_PORT 65535

static int copy_value(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap)
        return AL_E_TOOBIG;
    memcpy(dst, src, n);
    dst[n] = 0;
    return AL_OK;
}

int cli_config_parse_url(struct cli_config *c, const char *url, char *why, size_t cap)
{
    const char *p;
    if (!strncmp(url, "http://", 7)) {
        c->tls = 0;
        c->port = HTTP_PORT;
        p = url + 7;
    } else if (!strncmp(url, "https://", 8)) {
        c->tls = 1;
        c->port = HTTPS_PORT;
        p = url + 8;
    } else {
        al_errf(why, cap, "the server URL must start with http:// or https:// (got '%.80s')", url);
        return AL_E_INVAL;
    }
    if (copy_value(c->url, sizeof c->url, url, strlen(url)) != AL_OK) {
        al_errf(why, cap, "the server URL is too long");
        return AL_E_INVAL;
    }
    size_t hl = strcspn(p, ":/?#");
    if (hl == 0 || copy_value(c->host, sizeof c->host, p, hl) != AL_OK) {
        al_errf(why, cap, "the server URL has no usable host: '%.80s'", url);
        return AL_E_INVAL;
    }
    p += hl;
    if (*p == ':') {
        char *end;
        errno = 0;
        long port = strtol(p + 1, &end, 10);
        if (errno || end == p + 1 || port < 1 || port > MAX_PORT || (*end && *end != '/')) {
            al_errf(why, cap, "the server URL has a bad port: '%.80s'", url);
            return AL_E_INVAL;
        }
        c->port = (int)port;
        p = end;
    }
    if (*p && *p != '/') {
        al_errf(why, cap, "the server URL may not have a query or fragment: '%.80s'", url);
        return AL_E_INVAL;
    }
    size_t pl = strlen(p);
    while (pl > 0 && p[pl - 1] == '/')
        pl--;
    if (copy_value(c->prefix, sizeof c->prefix, p, pl) != AL_OK) {
        al_errf(why, cap, "the server URL is too long");
        return AL_E_INVAL;
    }
    return AL_OK;
}

/* Read the config file into buf (NUL-terminated). 1: read, 0: absent. */
static int read_file(const char *path, char *buf, size_t cap, char *why, size_t wcap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        al_errf(why, wcap, "cannot read %s: %s", path, strerror(errno));
        return AL_E_IO;
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            al_errf(why, wcap, "cannot read %s: %s", path, strerror(errno));
            close(fd);
            return AL_E_IO;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == cap - 1) {
            al_errf(why, wcap, "%s is larger than %d bytes", path, CLI_CONFIG_FILE_MAX);
            close(fd);
            return AL_E_INVAL;
        }
    }
    close(fd);
    buf[len] = 0;
    return 1;
}

static const char *skip_blank(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    return s;
}

/* Parse "url=" and "key=" lines into file_url/file_key. */
static int parse_file(const char *path, const char *text, char *file_url, size_t ucap,
                      char *file_key, size_t kcap, char *why, size_t cap)
{
    unsigned line = 0;
    for (const char *s = text; *s;) {
        const char *nl = strchr(s, '\n');
        const char *end = nl ? nl : s + strlen(s);
        line++;
        const char *b = skip_blank(s, end);
        const char *e = end;
        while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
            e--;
        if (b < e && *b != '#') {
            const char *eq = memchr(b, '=', (size_t)(e - b));
            const char *ke = eq;
            while (ke && ke > b && (ke[-1] == ' ' || ke[-1] == '\t'))
                ke--;
            const char *v = eq ? skip_blank(eq + 1, e) : NULL;
            int rc = AL_E_INVAL;
            if (eq && ke - b == 3 && !memcmp(b, "url", 3))
                rc = copy_value(file_url, ucap, v, (size_t)(e - v));
            else if (eq && ke - b == 3 && !memcmp(b, "key", 3))
                rc = copy_value(file_key, kcap, v, (size_t)(e - v));
            if (rc != AL_OK) {
                al_errf(why, cap, "%s line %u: expected url=... or key=...", path, line);
                return AL_E_INVAL;
            }
        }
        s = nl ? nl + 1 : end;
    }
    return AL_OK;
}

int cli_config_load(struct cli_config *c, const char *flag_url, const char *flag_key, char *why,
                    size_t cap)
{
    memset(c, 0, sizeof *c);
    char path[4096] = "";
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    if (xdg && *xdg)
        (void)snprintf(path, sizeof path, "%s/airlock/config", xdg);
    else if (home && *home)
        (void)snprintf(path, sizeof path, "%s/.config/airlock/config", home);
    char file_url[CLI_URL_MAX] = "", file_key[CLI_KEY_MAX] = "";
    if (path[0]) {
        char *text = malloc(CLI_CONFIG_FILE_MAX);
        if (!text)
            return AL_E_NOMEM;
        int rc = read_file(path, text, CLI_CONFIG_FILE_MAX, why, cap);
        if (rc == 1)
            rc = parse_file(path, text, file_url, sizeof file_url, file_key, sizeof file_key, why,
                            cap);
        free(text);
        if (rc < 0)
            return rc;
    }
    const char *env_url = getenv("AIRLOCK_URL"), *env_key = getenv("AIRLOCK_API_KEY");
    const char *url = flag_url ? flag_url : env_url && *env_url ? env_url : file_url;
    const char *key = flag_key ? flag_key : env_key && *env_key ? env_key : file_key;
    if (!*url) {
        al_errf(why, cap, "no server address: give --url, set AIRLOCK_URL, or put url=... in %s",
                path[0] ? path : "~/.config/airlock/config");
        return AL_E_INVAL;
    }
    if (copy_value(c->key, sizeof c->key, key, strlen(key)) != AL_OK) {
        al_errf(why, cap, "the API key is longer than %d bytes", CLI_KEY_MAX - 1);
        return AL_E_INVAL;
    }
    for (const char *k = c->key; *k; k++) {
        if (*k <= ' ' || *k == 0x7f) {
            al_errf(why, cap, "the API key holds a space or control character");
            return AL_E_INVAL;
        }
    }
    return cli_config_parse_url(c, url, why, cap);
}
