/*
 * rkey: runner keys, pinned per sandbox (rkey.h).
 */
#include "rkey.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_err.h"
#include "b64url.h"

#define RKEY_PATH_MAX 4352

int rkey_new(char out[AL_RUNNER_KEY_LEN + 1])
{
    uint8_t raw[AL_RUNNER_KEY_RAW];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return AL_E_IO;
    int rc = b64u_encode(raw, sizeof raw, out, AL_RUNNER_KEY_LEN + 1, NULL);
    OPENSSL_cleanse(raw, sizeof raw);
    return rc;
}

void rkey_hash(const char *key, size_t len, char out[RKEY_HASH_HEX + 1])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t md[32];
    unsigned n = 0;
    if (EVP_Digest(key, len, md, &n, EVP_sha256(), NULL) != 1 || n != sizeof md)
        memset(md, 0, sizeof md);
    for (size_t i = 0; i < sizeof md; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[RKEY_HASH_HEX] = 0;
}

static int path_of(const char *data_dir, const char *id, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s/%s/%s", data_dir, RKEY_DIR, id);
    return n > 0 && (size_t)n < cap && !strchr(id, '/') && id[0] != '.' ? AL_OK : AL_E_INVAL;
}

int rkey_load(const char *data_dir, const char *id, char out[RKEY_HASH_HEX + 1])
{
    char p[RKEY_PATH_MAX];
    if (path_of(data_dir, id, p, sizeof p) != AL_OK)
        return AL_E_INVAL;
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return al_err_from_errno(errno);
    ssize_t n = read(fd, out, RKEY_HASH_HEX);
    (void)close(fd);
    if (n != RKEY_HASH_HEX)
        return AL_E_IO;
    out[RKEY_HASH_HEX] = 0;
    for (int i = 0; i < RKEY_HASH_HEX; i++)
        if (!((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f')))
            return AL_E_IO;
    return AL_OK;
}

int rkey_store(const char *data_dir, const char *id, const char *hash)
{
    char p[RKEY_PATH_MAX], dir[RKEY_PATH_MAX], tmp[RKEY_PATH_MAX + 8];
    if (path_of(data_dir, id, p, sizeof p) != AL_OK)
        return AL_E_INVAL;
    if (!hash)
        return unlink(p) == 0 || errno == ENOENT ? AL_OK : AL_E_IO;
    (void)snprintf(dir, sizeof dir, "%s/%s", data_dir, RKEY_DIR);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return AL_E_IO;
    (void)snprintf(tmp, sizeof tmp, "%s.new", p);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return AL_E_IO;
    int ok = write(fd, hash, RKEY_HASH_HEX) == RKEY_HASH_HEX;
    ok = fsync(fd) == 0 && ok;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, p) != 0) {
        (void)unlink(tmp);
        return AL_E_IO;
    }
    return AL_OK;
}

int rkey_matches(const char *pinned_hash, const char *key, size_t len)
{
    char h[RKEY_HASH_HEX + 1];
    rkey_hash(key, len, h);
    return CRYPTO_memcmp(h, pinned_hash, RKEY_HASH_HEX) == 0;
}
