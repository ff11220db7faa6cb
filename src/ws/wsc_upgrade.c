/*
 * wsc_upgrade: the upgrade request and the checks of its answer (see
 * wsc_upgrade.h). Headers are read through http-parser's callbacks, which
 * may hand a name or a value over in pieces: a name is kept (lower case,
 * up to WSCU_FIELD_MAX bytes) until its value starts, and only the values
 * of the four headers we check are kept, each bounded.
 */
#include "wsc_upgrade.h"

#include <http_parser.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "al_err.h"

#define WSCU_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" /* RFC 6455 §1.3 */
#define WSCU_KEY_RAW 16

struct wscu {
    http_parser p;
    char accept[WSCU_ACCEPT_LEN + 1]; /* the Accept our key calls for */
    char subprotocol[WSCU_SUBPROTO_MAX + 1];
    char mark[WSCU_FIELD_MAX + 1]; /* a header whose presence is reported, or "" */
    int marked;
    size_t seen;                    /* bytes of the answer read */
    char field[WSCU_FIELD_MAX + 1]; /* the header name being read (lower case) */
    size_t field_len;               /* its bytes; > WSCU_FIELD_MAX: not one we check */
    int in_value;                   /* the last callback was a value */
    int which;                      /* the header whose value is read (H_*) */
    char value[WSCU_VALUE_MAX + 1]; /* its value so far */
    size_t value_len;
    unsigned got_upgrade, got_connection, got_accept, got_protocol, got_extensions; /* counts */
    int upgrade_ok, connection_ok, accept_ok, protocol_ok;
    enum wscu_state state;
    unsigned status; /* the answer's HTTP status, 0 before its status line */
    char why[WSCU_WHY_MAX];
};

enum { H_OTHER = 0, H_UPGRADE, H_CONNECTION, H_ACCEPT, H_PROTOCOL, H_EXTENSIONS };

static const struct {
    const char *name;
    int which;
} checked[] = {
    {"upgrade", H_UPGRADE},
    {"connection", H_CONNECTION},
    {"sec-websocket-accept", H_ACCEPT},
    {"sec-websocket-protocol", H_PROTOCOL},
    {"sec-websocket-extensions", H_EXTENSIONS},
};

static struct wscu *of(http_parser *p)
{
    return p->data;
}

static int fail(struct wscu *u, const char *why)
{
    if (u->state != WSCU_FAILED) {
        u->state = WSCU_FAILED;
        (void)snprintf(u->why, sizeof u->why, "%s", why);
    }
    return -1;
}

static int has_crlf(const char *s)
{
    return s && strpbrk(s, "\r\n") != NULL;
}

int wscu_accept_of(const char *key, char out[WSCU_ACCEPT_LEN + 1])
{
    char in[WSCU_KEY_LEN + sizeof WSCU_GUID];
    int n = snprintf(in, sizeof in, "%s%s", key, WSCU_GUID);
    if (n < 0 || (size_t)n >= sizeof in)
        return AL_E_INVAL;
    uint8_t md[SHA_DIGEST_LENGTH];
    if (!SHA1((const unsigned char *)in, (size_t)n, md))
        return AL_E_CRYPTO;
    if (EVP_EncodeBlock((unsigned char *)out, md, SHA_DIGEST_LENGTH) != WSCU_ACCEPT_LEN)
        return AL_E_CRYPTO;
    return AL_OK;
}

/* Header lines: each ends with CRLF, no CR or LF elsewhere, no empty
 * line (which would end the request early: a header injected). */
static int lines_ok(const char *s)
{
    if (!s || !*s)
        return 1;
    for (size_t i = 0; s[i]; i++) {
        if (s[i] == '\r' && (s[i + 1] != '\n' || i == 0 || s[i - 1] == '\n'))
            return 0;
        if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r'))
            return 0;
    }
    size_t n = strlen(s);
    return n >= 2 && s[n - 2] == '\r' && s[n - 1] == '\n';
}

int wscu_request(const struct wscu_request *r, char *buf, size_t cap, size_t *len,
                 char key[WSCU_KEY_LEN + 1])
{
    if (has_crlf(r->host) || has_crlf(r->path) || has_crlf(r->subprotocol) || !r->path ||
        r->path[0] != '/' || !lines_ok(r->extra))
        return AL_E_INVAL;
    uint8_t raw[WSCU_KEY_RAW];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return AL_E_IO;
    if (EVP_EncodeBlock((unsigned char *)key, raw, sizeof raw) != WSCU_KEY_LEN)
        return AL_E_CRYPTO;
    int n = snprintf(buf, cap,
                     "GET %s HTTP/1.1\r\n"
                     "Host: %s:%d\r\n"
                     "Upgrade: websocket\r\n"
                     "Connection: Upgrade\r\n"
                     "Sec-WebSocket-Key: %s\r\n"
                     "Sec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Protocol: %s\r\n"
                     "%s\r\n",
                     r->path, r->host, r->port, key, r->subprotocol, r->extra ? r->extra : "");
    if (n < 0 || (size_t)n >= cap)
        return AL_E_TOOBIG;
    *len = (size_t)n;
    return AL_OK;
}

/* Connection: a comma-separated list, one of whose tokens is "upgrade". */
static int names_upgrade(const char *v)
{
    const char *p = v;
    while (*p) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, " \t,");
        if (n == 7 && !strncasecmp(p, "upgrade", 7))
            return 1;
        p += n;
    }
    return 0;
}

/* A value is complete: check it. */
static int end_value(struct wscu *u)
{
    if (!u->in_value)
        return 0;
    u->in_value = 0;
    u->value[u->value_len] = 0;
    /* surrounding blanks: http-parser leaves trailing ones */
    while (u->value_len &&
           (u->value[u->value_len - 1] == ' ' || u->value[u->value_len - 1] == '\t'))
        u->value[--u->value_len] = 0;
    switch (u->which) {
    case H_UPGRADE:
        u->got_upgrade++;
        u->upgrade_ok = !strcasecmp(u->value, "websocket");
        break;
    case H_CONNECTION:
        u->got_connection++;
        u->connection_ok |= names_upgrade(u->value);
        break;
    case H_ACCEPT:
        u->got_accept++;
        u->accept_ok = !strcmp(u->value, u->accept);
        break;
    case H_PROTOCOL:
        u->got_protocol++;
        u->protocol_ok = !strcmp(u->value, u->subprotocol);
        break;
    case H_EXTENSIONS:
        u->got_extensions++;
        break;
    default:
        break;
    }
    return 0;
}

static int on_field(http_parser *p, const char *at, size_t len)
{
    struct wscu *u = of(p);
    if (u->in_value) {
        end_value(u);
        u->field_len = 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (u->field_len < WSCU_FIELD_MAX) {
            char ch = at[i];
            u->field[u->field_len] = (char)((ch >= 'A' && ch <= 'Z') ? ch + 32 : ch);
        }
        if (u->field_len <= WSCU_FIELD_MAX)
            u->field_len++;
    }
    return 0;
}

static int on_value(http_parser *p, const char *at, size_t len)
{
    struct wscu *u = of(p);
    if (!u->in_value) {
        u->in_value = 1;
        u->value_len = 0;
        u->which = H_OTHER;
        if (u->field_len <= WSCU_FIELD_MAX) {
            u->field[u->field_len] = 0;
            for (size_t i = 0; i < sizeof checked / sizeof checked[0]; i++)
                if (!strcmp(u->field, checked[i].name))
                    u->which = checked[i].which;
        }
        if (u->mark[0] && !strcmp(u->field, u->mark))
            u->marked = 1;
        u->field_len = 0;
    }
    if (u->which == H_OTHER)
        return 0;
    if (len > WSCU_VALUE_MAX - u->value_len)
        return fail(u, "a header value of the answer is too long");
    memcpy(u->value + u->value_len, at, len);
    u->value_len += len;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct wscu *u = of(p);
    end_value(u);
    u->status = p->status_code;
    if (p->status_code != 101)
        return fail(u, "the answer is not 101 Switching Protocols");
    if (u->got_upgrade != 1 || !u->upgrade_ok)
        return fail(u, "the answer's Upgrade is not websocket");
    if (!u->got_connection || !u->connection_ok)
        return fail(u, "the answer's Connection does not name upgrade");
    if (u->got_accept != 1 || !u->accept_ok)
        return fail(u, "the answer's Sec-WebSocket-Accept is missing or wrong");
    if (u->got_protocol != 1 || !u->protocol_ok)
        return fail(u, "the answer's Sec-WebSocket-Protocol is missing or not the one asked for");
    if (u->got_extensions) /* we asked for none (RFC 6455 §4.1) */
        return fail(u, "the answer names extensions that were not asked for");
    u->state = WSCU_UPGRADED;
    return 2; /* no body: what follows is the upgraded protocol */
}

static const http_parser_settings settings = {
    .on_header_field = on_field,
    .on_header_value = on_value,
    .on_headers_complete = on_headers_complete,
};

struct wscu *wscu_new(const char *key, const char *subprotocol, const char *mark)
{
    if (strlen(subprotocol) > WSCU_SUBPROTO_MAX || strlen(key) != WSCU_KEY_LEN ||
        (mark && strlen(mark) > WSCU_FIELD_MAX))
        return NULL;
    struct wscu *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    (void)snprintf(u->subprotocol, sizeof u->subprotocol, "%s", subprotocol);
    (void)snprintf(u->mark, sizeof u->mark, "%s", mark ? mark : "");
    if (wscu_accept_of(key, u->accept) != AL_OK) {
        free(u);
        return NULL;
    }
    http_parser_init(&u->p, HTTP_RESPONSE);
    u->p.data = u;
    return u;
}

void wscu_free(struct wscu *u)
{
    free(u);
}

unsigned wscu_status(const struct wscu *u)
{
    return u->status;
}

const char *wscu_why(const struct wscu *u)
{
    return u->why;
}

int wscu_marked(const struct wscu *u)
{
    return u->marked;
}

enum wscu_state wscu_feed(struct wscu *u, const uint8_t *in, size_t len, size_t *used)
{
    *used = 0;
    if (u->state != WSCU_MORE)
        return u->state;
    size_t room = WSCU_HEADER_MAX - u->seen;
    size_t take = len < room ? len : room;
    size_t n = http_parser_execute(&u->p, &settings, (const char *)in, take);
    u->seen += n;
    *used = n;
    if (u->state == WSCU_UPGRADED)
        return u->state;
    if (u->p.status_code && !u->status)
        u->status = u->p.status_code;
    if (u->state == WSCU_FAILED)
        return u->state;
    if (HTTP_PARSER_ERRNO(&u->p) != HPE_OK) {
        char why[WSCU_WHY_MAX];
        (void)snprintf(why, sizeof why, "not an HTTP answer (%s)",
                       http_errno_description(HTTP_PARSER_ERRNO(&u->p)));
        fail(u, why);
        return u->state;
    }
    if (u->seen >= WSCU_HEADER_MAX)
        fail(u, "the answer's headers exceed the limit");
    return u->state;
}
