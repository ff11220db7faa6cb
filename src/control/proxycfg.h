/*
 * proxycfg: the upstreams of the credential proxy, as airlockd's --config
 * file names them ("upstream.NAME.FIELD = value" lines, docs/proxy.md).
 * Control plane only (al_control). Pure; no global state (secret.h reads
 * the secrets).
 *
 * Data model: a proxycfg is a fixed array of at most PROXY_MAX_UPSTREAMS
 * upstreams, filled one key at a time by proxycfg_set() in the order the
 * file gives them, then checked as a whole by proxycfg_finish(). Each
 * upstream holds its settings by value (no pointers): copying a proxycfg
 * copies everything. A proxycfg never holds a secret: it holds where the
 * secret comes from (a file or a command), and the caller reads it when a
 * request needs it, so that a key never sits in a structure that a log or
 * an API view could print.
 */
#ifndef AL_PROXYCFG_H
#define AL_PROXYCFG_H

#include <stddef.h>
#include <stdint.h>

enum {
    PROXY_MAX_UPSTREAMS = 16,               /* upstreams in one configuration */
    PROXY_NAME_MAX = 32,                    /* bytes of an upstream's name ([a-z0-9_-]) */
    PROXY_URL_MAX = 512,                    /* bytes of a base URL */
    PROXY_PATH_MAX = 4096,                  /* bytes of a file path in the config */
    PROXY_COMMAND_MAX = 1024,               /* bytes of a secret-command */
    PROXY_MAX_PREFIXES = 8,                 /* path prefixes per upstream */
    PROXY_PREFIX_MAX = 128,                 /* bytes of one path prefix */
    PROXY_USER_MAX = 64,                    /* bytes of a Basic user name */
    PROXY_SECRET_MAX = 4096,                /* bytes of a secret (file or command output) */
    PROXY_DEFAULT_RPM = 600,                /* requests per minute per terminal */
    PROXY_DEFAULT_CONCURRENT = 16,          /* requests at once per terminal */
    PROXY_DEFAULT_CONNECT_MS = 10000,       /* upstream connect timeout */
    PROXY_DEFAULT_SECRET_TTL_S = 300,       /* a command's output is reused this long */
    PROXY_DEFAULT_RESPONSE_TIMEOUT_S = 600, /* first byte of the answer */
};
#define PROXY_DEFAULT_MAX_BODY (32ull << 20) /* request body bytes */
#define PROXY_DEFAULT_MAX_BYTES (4ull << 30) /* bytes both ways per terminal */

/* The environment handed to a terminal that uses the upstream (docs/proxy.md). */
enum proxy_kind {
    PROXY_KIND_HTTP = 0, /* none: the agent is told the base URL itself */
    PROXY_KIND_ANTHROPIC,
    PROXY_KIND_OPENAI,
    PROXY_KIND_GIT,
};

/* How the real secret S is sent upstream. */
enum proxy_header {
    PROXY_HEADER_BEARER = 0, /* Authorization: Bearer S */
    PROXY_HEADER_XAPIKEY,    /* x-api-key: S */
    PROXY_HEADER_BASIC,      /* Authorization: Basic base64(user:S) */
};

/* HTTP methods an upstream may allow, as a bit set. */
enum proxy_method {
    PROXY_M_GET = 1u << 0,
    PROXY_M_HEAD = 1u << 1,
    PROXY_M_POST = 1u << 2,
    PROXY_M_PUT = 1u << 3,
    PROXY_M_PATCH = 1u << 4,
    PROXY_M_DELETE = 1u << 5,
    PROXY_M_OPTIONS = 1u << 6,
};

struct proxy_upstream {
    char name[PROXY_NAME_MAX + 1];
    char url[PROXY_URL_MAX + 1]; /* scheme://host[:port][/base], no trailing '/' */
    enum proxy_kind kind;
    enum proxy_header header;
    char basic_user[PROXY_USER_MAX + 1];  /* for PROXY_HEADER_BASIC */
    char secret_file[PROXY_PATH_MAX + 1]; /* exactly one of these two */
    char secret_command[PROXY_COMMAND_MAX + 1];
    unsigned secret_ttl_s;            /* a command's output is cached this long */
    char ca_file[PROXY_PATH_MAX + 1]; /* "" : the system's store */
    char prefixes[PROXY_MAX_PREFIXES][PROXY_PREFIX_MAX + 1]; /* each starts and ends with '/' */
    unsigned nprefixes; /* 0 after finish: never (finish sets "/") */
    unsigned methods;   /* proxy_method bits, never 0 after finish */
    unsigned connect_timeout_ms;
    unsigned response_timeout_s; /* to the first byte of the answer; a stream may then idle */
    unsigned rpm;                /* requests per minute per terminal */
    unsigned concurrent;         /* requests at once per terminal */
    uint64_t max_body;           /* request body bytes */
    uint64_t max_bytes;          /* bytes both ways per terminal, over its life */
    int insecure_http;           /* the URL is http:// (allowed for tests; logged) */
    unsigned long long given;    /* proxycfg's own: bit i = fields row i was set */
};

struct proxycfg {
    struct proxy_upstream up[PROXY_MAX_UPSTREAMS];
    unsigned n;
};

void proxycfg_init(struct proxycfg *c);

/* 1 when `key` is a proxy key ("upstream." prefix), so that a config reader
 * can route it here; 0 otherwise. */
int proxycfg_is_key(const char *key);

/* Apply one "upstream.NAME.FIELD = value" line. AL_E_INVAL with a reason
 * naming the key for an unknown field, a bad name or a bad value;
 * AL_E_LIMIT past PROXY_MAX_UPSTREAMS; AL_E_EXISTS for a field given twice. */
int proxycfg_set(struct proxycfg *c, const char *key, const char *value, char *why, size_t cap);

/* Check every upstream is complete (a url and exactly one secret source)
 * and fill defaults. AL_E_INVAL with a reason naming the upstream. */
int proxycfg_finish(struct proxycfg *c, char *why, size_t cap);

/* NULL when there is no such upstream. */
const struct proxy_upstream *proxycfg_find(const struct proxycfg *c, const char *name);

/* The method's bit, 0 for a method the proxy never forwards (CONNECT,
 * TRACE, anything unknown). */
unsigned proxycfg_method_bit(const char *method);

/* The names of the kinds and header forms, for docs, logs and the API. */
const char *proxycfg_kind_name(enum proxy_kind k);

#endif
