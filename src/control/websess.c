/*
 * websess: see websess.h.
 *
 * Data model: none kept; every function reads caller strings (header
 * values, NUL-terminated) and writes into caller buffers. The sign-in
 * rules are the table login_rules, checked in order; the first that fails
 * names the reason.
 */
#include "websess.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "al_err.h"

static const char *cookie_name(bool tls)
{
    return tls ? WEBSESS_COOKIE_TLS : WEBSESS_COOKIE;
}

int websess_cookie_nth(const char *header, bool tls, unsigned n, char *out, size_t cap)
{
    if (!header || !out || cap == 0)
        return AL_E_INVAL;
    out[0] = 0;
    const char *name = cookie_name(tls);
    size_t nl = strlen(name);
    unsigned seen = 0;
    for (const char *p = header; *p;) {
        p += strspn(p, " \t;");
        size_t len = strcspn(p, ";");
        const char *eq = memchr(p, '=', len);
        if (eq && (size_t)(eq - p) == nl && !strncmp(p, name, nl) && seen++ == n) {
            size_t vl = len - nl - 1;
            while (vl && (eq[vl] == ' ' || eq[vl] == '\t'))
                vl--;
            if (vl >= cap)
                return AL_E_TOOBIG;
            memcpy(out, eq + 1, vl);
            out[vl] = 0;
            return AL_OK;
        }
        p += len;
    }
    return AL_E_NOENT;
}

int websess_set_cookie(bool tls, const char *value, int64_t max_age_s, char *out, size_t cap)
{
    if (!out || cap == 0 || max_age_s < 0)
        return AL_E_INVAL;
    /* __Host-: the browser takes it only with Secure, Path=/ and no Domain,
     * and only from a secure origin, so no other origin can set or shadow it */
    int n = snprintf(out, cap, "%s=%s; HttpOnly; SameSite=Strict; Path=/; Max-Age=%lld%s",
                     cookie_name(tls), value ? value : "", value ? (long long)max_age_s : 0LL,
                     tls ? "; Secure" : "");
    if (n < 0 || (size_t)n >= cap) {
        out[0] = 0;
        return AL_E_TOOBIG;
    }
    return AL_OK;
}

int websess_ws_csrf(const char *protocols, char *out, size_t cap)
{
    if (!protocols || !out || cap == 0)
        return AL_E_INVAL;
    out[0] = 0;
    size_t pl = strlen(WEBSESS_WS_CSRF_PREFIX);
    for (const char *p = protocols; *p;) {
        p += strspn(p, " \t,");
        size_t len = strcspn(p, " \t,");
        if (len > pl && !strncmp(p, WEBSESS_WS_CSRF_PREFIX, pl)) {
            if (len - pl >= cap)
                return AL_E_TOOBIG;
            memcpy(out, p + pl, len - pl);
            out[len - pl] = 0;
            return AL_OK;
        }
        p += len;
    }
    return AL_E_NOENT;
}

bool websess_origin_same(const char *origin, const char *host, bool tls)
{
    if (!origin || !host || !host[0])
        return false;
    const char *scheme = tls ? "https://" : "http://";
    size_t sl = strlen(scheme);
    return !strncmp(origin, scheme, sl) && !strcmp(origin + sl, host);
}

/* ---- sign-in ---------------------------------------------------------------- */

/* Content-Type: the media type before any parameter, case-insensitively. */
static bool is_json(const char *ct)
{
    static const char want[] = "application/json";
    if (!ct || strncasecmp(ct, want, sizeof want - 1) != 0)
        return false;
    char c = ct[sizeof want - 1];
    return c == 0 || c == ';' || c == ' ' || c == '\t';
}

/* Sec-Fetch-Site values a sign-in may carry ("same-site" is another port
 * of this host: refused). Absent: not a browser that sends it. */
static bool fetch_site_ok(const char *s)
{
    static const char *const ok[] = {"same-origin", "none"};
    if (!s)
        return true;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(s, ok[i]))
            return true;
    return false;
}

/* A browser sends Origin on every POST; a non-browser client may omit it. */
static bool origin_ok(const struct websess_login *r)
{
    return !r->origin || websess_origin_same(r->origin, r->host, r->tls);
}

static bool rule_json(const struct websess_login *r)
{
    return is_json(r->content_type);
}

static bool rule_fetch_site(const struct websess_login *r)
{
    return fetch_site_ok(r->sec_fetch_site);
}

static const struct {
    bool (*ok)(const struct websess_login *r);
    int code;
    const char *why;
} login_rules[] = {
    {rule_json, AL_E_FORMAT, "sign-in wants Content-Type: application/json"},
    {rule_fetch_site, AL_E_PERM, "cross-site sign-in refused (Sec-Fetch-Site)"},
    {origin_ok, AL_E_PERM, "sign-in from another origin refused (Origin)"},
};

int websess_login_check(const struct websess_login *r, char *why, size_t cap)
{
    if (!r)
        return AL_E_INVAL;
    for (size_t i = 0; i < sizeof login_rules / sizeof login_rules[0]; i++) {
        if (!login_rules[i].ok(r)) {
            al_errf(why, cap, "%s", login_rules[i].why);
            return login_rules[i].code;
        }
    }
    al_errf(why, cap, "%s", "");
    return AL_OK;
}
