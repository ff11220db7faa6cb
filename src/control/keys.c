/*
 * keys: Ed25519 signing keys, key files and jwks.json. See keys.h.
 *
 * Data model:
 *   struct keys_signing owns one EVP_PKEY (Ed25519, private) and caches its
 *   kid. PEM text of a private key only ever lives in OpenSSL secure-memory
 *   BIOs or in buffers that are cleansed before they are freed.
 *   struct keys_pub is a public key as jwks.json lists it: kid plus raw x;
 *   keys_init_dir gathers an array of them (bounded by TOK_MAX_KEYS) to
 *   write the new jwks.json.
 *
 * File writes go to "<final>.new" created with O_EXCL, then are renamed (or
 * hard-linked, when the target must not be replaced) into place, and the
 * directory is fsync'ed.
 */
#include "keys.h"

#include "al_err.h"
#include "b64url.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct keys_signing {
    EVP_PKEY *pkey; /* owned, Ed25519 private key */
    char kid[KEYS_KID_LEN + 1];
};

struct keys_pub {
    char kid[TOK_MAX_KID + 1];
    uint8_t x[TOK_KEY_LEN];
};

int keys_path(const char *dir, const char *name, char *out, size_t cap)
{
    if (!dir || !name || !out || cap == 0 || dir[0] == '\0')
        return AL_E_INVAL;
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        out[0] = '\0';
        return AL_E_TOOBIG;
    }
    return AL_OK;
}

/* ---- keys ------------------------------------------------------------- */

void keys_free(struct keys_signing *k)
{
    if (!k)
        return;
    EVP_PKEY_free(k->pkey);
    free(k);
}

const char *keys_kid(const struct keys_signing *k)
{
    return k ? k->kid : "";
}

int keys_public_raw(const struct keys_signing *k, uint8_t x[TOK_KEY_LEN])
{
    if (!k || !x)
        return AL_E_INVAL;
    size_t len = TOK_KEY_LEN;
    if (EVP_PKEY_get_raw_public_key(k->pkey, x, &len) != 1 || len != TOK_KEY_LEN) {
        ERR_clear_error();
        return AL_E_CRYPTO;
    }
    return AL_OK;
}

int keys_thumbprint(const uint8_t x[TOK_KEY_LEN], char *kid, size_t cap)
{
    if (!x || !kid || cap < KEYS_KID_LEN + 1)
        return AL_E_INVAL;
    /* RFC 7638: the required members, sorted, no whitespace (RFC 8037 s. 2). */
    char xs[B64U_ENC_LEN(TOK_KEY_LEN) + 1];
    int rc = b64u_encode(x, TOK_KEY_LEN, xs, sizeof xs, NULL);
    if (rc != AL_OK)
        return rc;
    char canon[128];
    int n = snprintf(canon, sizeof canon, "{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"%s\"}", xs);
    if (n < 0 || (size_t)n >= sizeof canon)
        return AL_E_TOOBIG;
    uint8_t md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (EVP_Digest(canon, (size_t)n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        ERR_clear_error();
        return AL_E_CRYPTO;
    }
    return b64u_encode(md, mdlen, kid, cap, NULL);
}

/* Take ownership of pkey (freed on failure too). */
static int keys_wrap(EVP_PKEY *pkey, struct keys_signing **out, char *reason, size_t cap)
{
    if (EVP_PKEY_is_a(pkey, "ED25519") != 1) {
        EVP_PKEY_free(pkey);
        al_errf(reason, cap, "not an Ed25519 key");
        return AL_E_FORMAT;
    }
    struct keys_signing *k = calloc(1, sizeof *k);
    if (!k) {
        EVP_PKEY_free(pkey);
        return AL_E_NOMEM;
    }
    k->pkey = pkey;
    uint8_t x[TOK_KEY_LEN];
    int rc = keys_public_raw(k, x);
    if (rc == AL_OK)
        rc = keys_thumbprint(x, k->kid, sizeof k->kid);
    if (rc != AL_OK) {
        keys_free(k);
        al_errf(reason, cap, "cannot compute the key id");
        return rc;
    }
    *out = k;
    return AL_OK;
}

int keys_generate(struct keys_signing **out, char *reason, size_t cap)
{
    if (!out)
        return AL_E_INVAL;
    *out = NULL;
    EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    if (!pkey) {
        ERR_clear_error();
        al_errf(reason, cap, "OpenSSL could not generate an Ed25519 key");
        return AL_E_CRYPTO;
    }
    return keys_wrap(pkey, out, reason, cap);
}

int keys_from_seed(const uint8_t seed[KEYS_SEED_LEN], struct keys_signing **out, char *reason,
                   size_t cap)
{
    if (!out || !seed)
        return AL_E_INVAL;
    *out = NULL;
    EVP_PKEY *pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, seed, KEYS_SEED_LEN);
    if (!pkey) {
        ERR_clear_error();
        al_errf(reason, cap, "OpenSSL refused the Ed25519 seed");
        return AL_E_CRYPTO;
    }
    return keys_wrap(pkey, out, reason, cap);
}

int keys_sign(const struct keys_signing *k, const uint8_t *msg, size_t len,
              uint8_t sig[TOK_SIG_LEN])
{
    if (!k || (!msg && len > 0) || !sig)
        return AL_E_INVAL;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        return AL_E_NOMEM;
    size_t siglen = TOK_SIG_LEN;
    int rc = AL_OK;
    /* Ed25519 is one-shot: no digest, then EVP_DigestSign over the message. */
    if (EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) != 1 ||
        EVP_DigestSign(ctx, sig, &siglen, msg, len) != 1 || siglen != TOK_SIG_LEN)
        rc = AL_E_CRYPTO;
    EVP_MD_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

/* PEM passphrase callback: our keys are never encrypted, and OpenSSL must
 * never prompt on a terminal. */
static int keys_no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

int keys_load_private(const char *path, struct keys_signing **out, char *reason, size_t cap)
{
    if (reason && cap > 0)
        reason[0] = '\0';
    if (!out || !path)
        return AL_E_INVAL;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return al_errf_errno(reason, cap, errno, "cannot open signing key %s", path);
    int rc = AL_OK;
    char *buf = NULL;
    size_t len = 0;
    BIO *bio = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        al_errf(reason, cap, "signing key %s is not a regular file", path);
        rc = AL_E_IO;
        goto done;
    }
    if ((st.st_mode & 077) != 0) {
        al_errf(reason, cap,
                "signing key %s has mode %04o: group or others may access it; "
                "refusing to use it (chmod 600 it; if it may have leaked, delete it and "
                "jwks.json and run airlockd keygen)",
                path, (unsigned)(st.st_mode & 07777));
        rc = AL_E_PERM;
        goto done;
    }
    if (st.st_size > KEYS_MAX_PEM_BYTES) {
        al_errf(reason, cap, "signing key %s is larger than %d bytes", path, KEYS_MAX_PEM_BYTES);
        rc = AL_E_TOOBIG;
        goto done;
    }
    buf = malloc(KEYS_MAX_PEM_BYTES + 1);
    if (!buf) {
        rc = AL_E_NOMEM;
        goto done;
    }
    while (len < KEYS_MAX_PEM_BYTES + 1) {
        ssize_t r = read(fd, buf + len, KEYS_MAX_PEM_BYTES + 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            al_errf(reason, cap, "cannot read signing key %s: %s", path, strerror(errno));
            rc = AL_E_IO;
            goto done;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    if (len > KEYS_MAX_PEM_BYTES) {
        al_errf(reason, cap, "signing key %s is larger than %d bytes", path, KEYS_MAX_PEM_BYTES);
        rc = AL_E_TOOBIG;
        goto done;
    }
    bio = BIO_new_mem_buf(buf, (int)len);
    if (!bio) {
        rc = AL_E_NOMEM;
        goto done;
    }
    EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, keys_no_passphrase, NULL);
    ERR_clear_error();
    if (!pkey) {
        al_errf(reason, cap, "signing key %s is not an unencrypted PEM private key", path);
        rc = AL_E_FORMAT;
        goto done;
    }
    char inner[TOK_REASON_MAX];
    rc = keys_wrap(pkey, out, inner, sizeof inner);
    if (rc != AL_OK)
        al_errf(reason, cap, "signing key %s: %s", path, inner);
done:
    BIO_free(bio);
    if (buf) {
        OPENSSL_cleanse(buf, KEYS_MAX_PEM_BYTES + 1);
        free(buf);
    }
    close(fd);
    return rc;
}

/* Write all of buf to fd, then fsync. */
static int keys_write_all(int fd, const char *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return fsync(fd);
}

/* Create path (must not exist) with mode and content; on failure nothing
 * is left behind. */
static int keys_create_file(const char *path, mode_t mode, const char *data, size_t len,
                            char *reason, size_t cap)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
    if (fd < 0)
        return al_errf_errno(reason, cap, errno, "cannot create %s", path);
    int werr = keys_write_all(fd, data, len) != 0 ? errno : 0;
    if (close(fd) != 0 && werr == 0)
        werr = errno;
    if (werr != 0) {
        al_errf(reason, cap, "cannot write %s: %s", path, strerror(werr));
        (void)unlink(path);
        return AL_E_IO;
    }
    return AL_OK;
}

int keys_write_private(const struct keys_signing *k, const char *path, char *reason, size_t cap)
{
    if (reason && cap > 0)
        reason[0] = '\0';
    if (!k || !path)
        return AL_E_INVAL;
    /* Secure-memory BIO: the PEM text is cleansed when the BIO is freed. */
    BIO *bio = BIO_new(BIO_s_secmem());
    if (!bio)
        return AL_E_NOMEM;
    int rc;
    if (PEM_write_bio_PrivateKey(bio, k->pkey, NULL, NULL, 0, NULL, NULL) != 1) {
        ERR_clear_error();
        al_errf(reason, cap, "OpenSSL could not encode the private key");
        rc = AL_E_CRYPTO;
    } else {
        char *pem = NULL;
        long plen = BIO_get_mem_data(bio, &pem);
        if (plen <= 0 || !pem) {
            rc = AL_E_CRYPTO;
        } else {
            rc = keys_create_file(path, KEYS_PRIVATE_MODE, pem, (size_t)plen, reason, cap);
            if (rc == AL_E_EXISTS)
                al_errf(reason, cap, "%s already exists; not overwriting it", path);
        }
    }
    BIO_free(bio);
    return rc;
}

/* ---- jwks.json -------------------------------------------------------- */

static int keys_pub_of(const struct keys_signing *k, struct keys_pub *p)
{
    memcpy(p->kid, k->kid, sizeof k->kid);
    return keys_public_raw(k, p->x);
}

static int keys_pubs_json(const struct keys_pub *pubs, size_t n, char **out, char *reason,
                          size_t cap)
{
    *out = NULL;
    json_t *arr = json_array();
    json_t *root = json_pack("{s:o}", "keys", arr);
    if (!root) /* json_pack steals arr even on failure ("o") */
        return AL_E_NOMEM;
    int rc = AL_OK;
    for (size_t i = 0; i < n; i++) {
        char xs[B64U_ENC_LEN(TOK_KEY_LEN) + 1];
        rc = b64u_encode(pubs[i].x, TOK_KEY_LEN, xs, sizeof xs, NULL);
        if (rc != AL_OK)
            break;
        json_t *jwk = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "kty", "OKP", "crv", "Ed25519",
                                "x", xs, "kid", pubs[i].kid, "use", "sig", "alg", "EdDSA");
        if (!jwk || json_array_append_new(arr, jwk) != 0) {
            rc = AL_E_NOMEM;
            break;
        }
    }
    if (rc == AL_OK) {
        char *text = json_dumps(root, JSON_INDENT(2));
        if (!text) {
            rc = AL_E_NOMEM;
        } else {
            /* Add the final newline a text file should have. */
            size_t tlen = strlen(text);
            char *withnl = malloc(tlen + 2);
            if (!withnl) {
                rc = AL_E_NOMEM;
            } else {
                memcpy(withnl, text, tlen);
                withnl[tlen] = '\n';
                withnl[tlen + 1] = '\0';
                *out = withnl;
            }
            free(text);
        }
    }
    if (rc != AL_OK)
        al_errf(reason, cap, "cannot build the JWKS");
    json_decref(root);
    return rc;
}

int keys_jwks_json(const struct keys_signing *const *keys, size_t n, char **out, char *reason,
                   size_t cap)
{
    if (!out)
        return AL_E_INVAL;
    *out = NULL;
    if (!keys || n == 0 || n > TOK_MAX_KEYS)
        return AL_E_INVAL;
    struct keys_pub pubs[TOK_MAX_KEYS];
    for (size_t i = 0; i < n; i++) {
        int rc = keys[i] ? keys_pub_of(keys[i], &pubs[i]) : AL_E_INVAL;
        if (rc != AL_OK)
            return rc;
    }
    return keys_pubs_json(pubs, n, out, reason, cap);
}

/* Append p to pubs unless its kid is there already or the set is full. */
static void keys_pubs_add(struct keys_pub *pubs, size_t *n, const struct keys_pub *p)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(pubs[i].kid, p->kid) == 0)
            return;
    if (*n < TOK_MAX_KEYS)
        pubs[(*n)++] = *p;
}

/* ---- data directory --------------------------------------------------- */

static int keys_ensure_dir(const char *dir, char *reason, size_t cap)
{
    if (mkdir(dir, KEYS_DIR_MODE) == 0)
        return AL_OK;
    int e = errno;
    struct stat st;
    if (e == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return AL_OK;
    if (e == EEXIST) {
        al_errf(reason, cap, "%s exists and is not a directory", dir);
        return AL_E_IO;
    }
    return al_errf_errno(reason, cap, e, "cannot create data directory %s", dir);
}

static void keys_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: the files themselves were fsync'ed */
        (void)close(fd);
    }
}

/* Existing public keys to keep on rotation: the previous private key's
 * public half first, then what jwks.json lists. */
static int keys_gather_old(const char *key_path, const char *jwks_path, struct keys_pub *pubs,
                           size_t *n, char *reason, size_t cap)
{
    struct keys_signing *old = NULL;
    int rc = keys_load_private(key_path, &old, reason, cap);
    if (rc == AL_OK && old) { /* old: the analyzer cannot see that errors are < 0 */
        struct keys_pub p;
        rc = keys_pub_of(old, &p);
        keys_free(old);
        if (rc != AL_OK)
            return rc;
        keys_pubs_add(pubs, n, &p);
    } else if (rc != AL_OK && rc != AL_E_NOENT) {
        return rc; /* e.g. unsafe mode: say so rather than drop the key */
    }
    struct tok_keyset *ks = NULL;
    char inner[TOK_REASON_MAX];
    rc = tok_keyset_from_file(jwks_path, &ks, inner, sizeof inner);
    if (rc == AL_E_NOENT)
        return AL_OK;
    if (rc != AL_OK) {
        al_errf(reason, cap, "cannot keep the published keys: %s (fix or remove it)", inner);
        return rc;
    }
    for (size_t i = 0; i < tok_keyset_count(ks) && rc == AL_OK; i++) {
        struct keys_pub p;
        const char *kid = NULL;
        rc = tok_keyset_get(ks, i, &kid, p.x);
        if (rc == AL_OK) {
            size_t kl = strlen(kid);
            memcpy(p.kid, kid, kl + 1);
            keys_pubs_add(pubs, n, &p);
        }
    }
    tok_keyset_free(ks);
    return rc;
}

static int keys_publish_jwks(const char *dir, const struct keys_pub *pubs, size_t n, char *reason,
                             size_t cap)
{
    char path[KEYS_PATH_MAX], tmp[KEYS_PATH_MAX];
    if (keys_path(dir, KEYS_JWKS_FILE, path, sizeof path) != AL_OK ||
        keys_path(dir, KEYS_JWKS_FILE ".new", tmp, sizeof tmp) != AL_OK) {
        al_errf(reason, cap, "data directory path too long");
        return AL_E_TOOBIG;
    }
    char *text = NULL;
    int rc = keys_pubs_json(pubs, n, &text, reason, cap);
    if (rc != AL_OK)
        return rc;
    (void)unlink(tmp); /* a leftover from an interrupted run */
    rc = keys_create_file(tmp, KEYS_JWKS_MODE, text, strlen(text), reason, cap);
    free(text);
    if (rc != AL_OK)
        return rc;
    if (rename(tmp, path) != 0) {
        int e = errno;
        (void)unlink(tmp);
        return al_errf_errno(reason, cap, e, "cannot rename %s to %s", tmp, path);
    }
    return AL_OK;
}

/* Move tmp to path: replace it (rotate) or only if absent (link(2)). */
static int keys_install(const char *tmp, const char *path, bool replace, char *reason, size_t cap)
{
    if (replace) {
        if (rename(tmp, path) == 0)
            return AL_OK;
    } else if (link(tmp, path) == 0) {
        (void)unlink(tmp);
        return AL_OK;
    }
    int e = errno;
    if (e != EEXIST)
        return al_errf_errno(reason, cap, e, "cannot install %s", path);
    al_errf(reason, cap, "%s already exists; not overwriting it", path);
    return al_err_from_errno(e);
}

int keys_init_dir(const char *dir, bool rotate, struct keys_init_result *res, char *reason,
                  size_t cap)
{
    if (reason && cap > 0)
        reason[0] = '\0';
    if (res)
        memset(res, 0, sizeof *res);
    if (!dir || dir[0] == '\0')
        return AL_E_INVAL;
    char key_path[KEYS_PATH_MAX], key_tmp[KEYS_PATH_MAX], jwks_path[KEYS_PATH_MAX];
    if (keys_path(dir, KEYS_PRIVATE_FILE, key_path, sizeof key_path) != AL_OK ||
        keys_path(dir, KEYS_PRIVATE_FILE ".new", key_tmp, sizeof key_tmp) != AL_OK ||
        keys_path(dir, KEYS_JWKS_FILE, jwks_path, sizeof jwks_path) != AL_OK) {
        al_errf(reason, cap, "data directory path too long");
        return AL_E_TOOBIG;
    }
    int rc = keys_ensure_dir(dir, reason, cap);
    if (rc != AL_OK)
        return rc;

    struct stat st;
    bool have_key = lstat(key_path, &st) == 0;
    if (have_key && !rotate) {
        al_errf(reason, cap,
                "%s already exists; refusing to overwrite the signing key "
                "(use --rotate to replace it and keep its public key in %s)",
                key_path, KEYS_JWKS_FILE);
        return AL_E_EXISTS;
    }

    struct keys_pub pubs[TOK_MAX_KEYS];
    size_t n = 0;
    struct keys_signing *k = NULL;
    rc = keys_generate(&k, reason, cap);
    if (rc != AL_OK)
        return rc;
    rc = keys_pub_of(k, &pubs[0]);
    if (rc != AL_OK)
        goto done;
    n = 1;
    if (rotate) {
        rc = keys_gather_old(key_path, jwks_path, pubs, &n, reason, cap);
        if (rc != AL_OK)
            goto done;
    }
    /* 1: the new private key, beside the current one. */
    (void)unlink(key_tmp);
    rc = keys_write_private(k, key_tmp, reason, cap);
    if (rc != AL_OK)
        goto done;
    /* 2: publish the public keys before any token can be signed with it. */
    rc = keys_publish_jwks(dir, pubs, n, reason, cap);
    /* 3: make it current. */
    if (rc == AL_OK)
        rc = keys_install(key_tmp, key_path, rotate, reason, cap);
    if (rc != AL_OK)
        (void)unlink(key_tmp);
    keys_sync_dir(dir);
    if (rc == AL_OK && res) {
        memcpy(res->kid, k->kid, sizeof res->kid);
        res->jwks_keys = n;
    }
done:
    keys_free(k);
    return rc;
}
