/*
 * platform: the managed sandbox platforms airlockd dials runners on
 * (docs/aca.md), as its --config file names them ("platform.NAME.FIELD =
 * value" lines), and the cache of each platform's own token.
 *
 * A platform's front (Azure Container Apps' pool management endpoint)
 * takes `Authorization` for a token of its own, which opens every session
 * of the pool: airlockd alone holds it, read from a file (mode 0600) or
 * the first line of a command (`az account get-access-token ...`), and
 * keeps it until shortly before it expires (the `exp` of a JWT, less
 * PLATFORM_EXP_MARGIN_S) or for token-ttl seconds, whichever comes first.
 * A token never goes into a log, an error, the API or the database.
 *
 * Fields (the table fields[] in platform.c):
 *   token-file     an absolute path (exactly one of token-file and
 *   token-command  token-command: under /bin/sh -c, secret.h)
 *   token-ttl      seconds a token is reused at most (default 3000)
 *   ping-interval  seconds between pings on its runner links (default 15,
 *                  at most 30; well under the front's idle cut: 240 s on ACA)
 *
 * Data model: a fixed array of at most PLATFORM_MAX platforms, by value;
 * the caller owns the struct (large: the cache holds a token per
 * platform). No global state.
 */
#ifndef AL_PLATFORM_H
#define AL_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

enum {
    PLATFORM_MAX = 8,              /* platforms in one configuration */
    PLATFORM_NAME_MAX = 32,        /* bytes of a name ([a-z0-9_-]) */
    PLATFORM_PATH_MAX = 4096,      /* bytes of a token-file path */
    PLATFORM_COMMAND_MAX = 1024,   /* bytes of a token-command */
    PLATFORM_TOKEN_MAX = 8192,     /* bytes of a token (Entra's run 1.5-4 KB) */
    PLATFORM_DEFAULT_TTL_S = 3000, /* a token is read anew after this at most */
    PLATFORM_EXP_MARGIN_S = 120,   /* ... and this long before its exp */
    PLATFORM_DEFAULT_PING_S = 15,  /* pings on its links (the link default) */
    PLATFORM_MAX_PING_S = 30,      /* a ping-interval's bound: under the link idle timeout */
    PLATFORM_MAX_TTL_S = 86400,    /* a token-ttl's bound */
};

struct platform_def {
    char name[PLATFORM_NAME_MAX + 1];
    char token_file[PLATFORM_PATH_MAX];
    char token_command[PLATFORM_COMMAND_MAX + 1];
    unsigned token_ttl_s;
    unsigned ping_s;
    unsigned given; /* bit i: fields[i] was set */
};

struct platform_token {
    char value[PLATFORM_TOKEN_MAX + 1];
    int64_t until_ms; /* monotonic ms; 0: none held */
};

struct platforms {
    unsigned n;
    struct platform_def def[PLATFORM_MAX];
    struct platform_token tok[PLATFORM_MAX];
};

void platforms_init(struct platforms *p);
/* Wipe the tokens held. */
void platforms_clear(struct platforms *p);

/* Whether key is a "platform." key. */
int platform_is_key(const char *key);

/* Apply one "platform.NAME.FIELD = value" line. AL_E_INVAL with a reason
 * naming the key; AL_E_LIMIT past PLATFORM_MAX; AL_E_EXISTS twice. */
int platform_set(struct platforms *p, const char *key, const char *value, char *why, size_t cap);

/* Each platform has exactly one token source; defaults filled. */
int platform_finish(struct platforms *p, char *why, size_t cap);

/* NULL when none is called name. */
const struct platform_def *platform_find(const struct platforms *p, const char *name);

/* Whether name is a well-formed platform name (1..PLATFORM_NAME_MAX of
 * [a-z0-9_-]). */
int platform_name_valid(const char *name, size_t len);

/* The token of platform name, from the cache or read anew at now_ms
 * (monotonic) / unix_s (the clock a JWT's exp is on). AL_E_NOENT for an
 * unknown platform, the reader's error otherwise (why names the platform,
 * never the token); a JWT already past its exp is AL_E_EXPIRED. */
int platform_token(struct platforms *p, const char *name, int64_t now_ms, int64_t unix_s, char *out,
                   size_t cap, char *why, size_t wcap);

/* The exp of a JWT-shaped token (unverified: only to know when to read it
 * anew), or 0 when it has none. */
int64_t platform_token_exp(const char *token);

#endif
