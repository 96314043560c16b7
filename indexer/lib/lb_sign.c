/*
 * lb_sign.c — signed days (FORMAT.md §14.6). When a day of a logspace ends (its whole-day
 * merge done), its chain gets a day-root record: the chain head then, with an Ed25519
 * signature over it by the box's signing key (<data>/indexd/sign.key), whose public key
 * (sign.pub) the admin downloads and keeps. OpenSSL's EVP does the signing.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "logbox.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

static int
path_of(char *buf, size_t len, const char *data, const char *file)
{
	return (lb_path(buf, len, "%s/%s", data, file));
}

/* The message a day root's signature covers. */
static void
signed_msg(uint8_t m[LB_SIGN_MSG_LEN], const char *ls, uint32_t day, uint64_t seq,
    const uint8_t prev[LB_SHA256_LEN], uint64_t first_id, uint64_t count)
{
	size_t o = LB_SIGN_TAG_LEN;

	memset(m, 0, LB_SIGN_MSG_LEN);
	memcpy(m, LB_SIGN_TAG, LB_SIGN_TAG_LEN);
	memcpy(m + o, ls, strnlen(ls, 64));
	o += 64;
	lb_put32(m + o, day);
	lb_put64(m + o + 4, seq);
	memcpy(m + o + 12, prev, LB_SHA256_LEN);
	lb_put64(m + o + 44, first_id);
	lb_put64(m + o + 52, count);
}

static int
write_pem(const char *path, EVP_PKEY *k, int priv)
{
	FILE	*f;
	int	 fd, ok;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, priv ? 0600 : 0644)) == -1)
		return (errno);
	if ((f = fdopen(fd, "w")) == NULL) {
		close(fd);
		return (errno);
	}
	ok = priv ? PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) :
	    PEM_write_PUBKEY(f, k);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		ok = 0;
	if (fclose(f) != 0)
		ok = 0;
	return (ok ? 0 : EIO);
}

int
lb_sign_init(const char *data)
{
	EVP_PKEY	*k;
	char		 kp[PATH_MAX], pp[PATH_MAX], dir[PATH_MAX];
	int		 rc;

	if ((rc = path_of(kp, sizeof(kp), data, LB_SIGN_KEY_FILE)) != 0 ||
	    (rc = path_of(pp, sizeof(pp), data, LB_SIGN_PUB_FILE)) != 0 ||
	    (rc = path_of(dir, sizeof(dir), data, LB_DIR_INDEXD)) != 0 ||
	    (rc = lb_mkdirs(dir)) != 0)
		return (rc);
	if (access(kp, F_OK) == 0)
		return (EEXIST);
	if ((k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519")) == NULL)
		return (ENOMEM);
	if ((rc = write_pem(kp, k, 1)) == 0 && (rc = write_pem(pp, k, 0)) != 0)
		unlink(kp);
	EVP_PKEY_free(k);
	if (rc == 0)
		rc = lb_fsync_dir(dir);
	return (rc);
}

static int
read_key(const char *path, int priv, EVP_PKEY **out)
{
	FILE *f;

	if ((f = fopen(path, "re")) == NULL)
		return (errno);
	*out = priv ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : PEM_read_PUBKEY(f, NULL, NULL,
	    NULL);
	fclose(f);
	if (*out == NULL || EVP_PKEY_get_base_id(*out) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(*out);
		*out = NULL;
		return (LB_EFORMAT);
	}
	return (0);
}

/* An Ed25519 signature of m[0..len) with k into sig: 0, ENOMEM or EIO. */
static int
sign_msg(EVP_PKEY *k, const uint8_t *m, size_t len, uint8_t sig[LB_SIGN_SIG_LEN])
{
	size_t		 n = LB_SIGN_SIG_LEN;
	EVP_MD_CTX	*ctx;
	int		 ok;

	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return (ENOMEM);
	ok = EVP_DigestSignInit(ctx, NULL, NULL, NULL, k) == 1 &&
	    EVP_DigestSign(ctx, sig, &n, m, len) == 1 && n == LB_SIGN_SIG_LEN;
	EVP_MD_CTX_free(ctx);
	return (ok ? 0 : EIO);
}

/* Whether sig is an Ed25519 signature of m[0..len) by k: 0, or LB_ECORRUPT when not. */
static int
verify_with(EVP_PKEY *k, const uint8_t *m, size_t len, const uint8_t sig[LB_SIGN_SIG_LEN])
{
	EVP_MD_CTX	*ctx;
	int		 ok;

	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return (ENOMEM);
	ok = EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k) == 1 &&
	    EVP_DigestVerify(ctx, sig, LB_SIGN_SIG_LEN, m, len) == 1;
	EVP_MD_CTX_free(ctx);
	return (ok ? 0 : LB_ECORRUPT);
}

/*
 * Whether sig is an Ed25519 signature of m[0..len) by the public key in pubpath: 0, or
 * LB_ECORRUPT when not; read_key's errors for the key file.
 */
static int
verify_msg(const char *pubpath, const uint8_t *m, size_t len,
    const uint8_t sig[LB_SIGN_SIG_LEN])
{
	EVP_PKEY	*k;
	int		 rc;

	if ((rc = read_key(pubpath, 0, &k)) != 0)
		return (rc);
	rc = verify_with(k, m, len, sig);
	EVP_PKEY_free(k);
	return (rc);
}

struct signarg {
	EVP_PKEY	*k;
	const char	*ls;
	uint32_t	 day;
	int		 rc;
};

static int
fill_root(struct lb_chrec *r, const uint8_t *prev, void *arg)
{
	struct signarg	*a = arg;
	uint8_t		 m[LB_SIGN_MSG_LEN];

	signed_msg(m, a->ls, a->day, r->seq - 1, prev, r->first_id, r->count);
	return (sign_msg(a->k, m, sizeof(m), r->sig));
}

int
lb_sign_day(const char *data, const char *ls, uint32_t day, uint64_t first_id,
    uint64_t count, const struct lb_chgen *gen)
{
	struct signarg	 a = { NULL, ls, day, 0 };
	struct lb_chrec	 r;
	char		 kp[PATH_MAX], dir[PATH_MAX];
	int		 rc;

	if ((rc = path_of(kp, sizeof(kp), data, LB_SIGN_KEY_FILE)) != 0)
		return (rc);
	if ((rc = read_key(kp, 1, &a.k)) != 0)
		return (rc);
	if ((rc = lb_day_dir(dir, sizeof(dir), data, ls, day)) == 0) {
		memset(&r, 0, sizeof(r));
		r.kind = LB_CH_DAYROOT;
		r.first_id = first_id;
		r.count = count;
		rc = lb_chain_append_fill(dir, gen, &r, 1, 1, 0, fill_root, &a);
	}
	EVP_PKEY_free(a.k);
	return (rc);
}

int
lb_sign_check(const char *pubpath, const char *ls, uint32_t day, uint64_t seq,
    const uint8_t prev[LB_SHA256_LEN], uint64_t first_id, uint64_t count,
    const uint8_t sig[LB_SIGN_SIG_LEN])
{
	uint8_t		 m[LB_SIGN_MSG_LEN];

	signed_msg(m, ls, day, seq, prev, first_id, count);
	return (verify_msg(pubpath, m, sizeof(m), sig));
}

/* The message a tombstone's signature covers (FORMAT.md §14.6). */
static void
tomb_msg(uint8_t m[LB_TOMB_MSG_LEN], const char *ls, const struct lb_chrec *r,
    const uint8_t prev[LB_SHA256_LEN])
{
	size_t o = LB_SIGN_TAG_LEN;

	memset(m, 0, LB_TOMB_MSG_LEN);
	memcpy(m, LB_TOMB_TAG, LB_SIGN_TAG_LEN);
	memcpy(m + o, ls, strnlen(ls, 64));
	o += 64;
	lb_put32(m + o, r->day);
	lb_put64(m + o + 4, r->first_id);
	lb_put64(m + o + 12, r->count);
	lb_put64(m + o + 20, r->prev_seq);
	memcpy(m + o + 28, r->sha, LB_SHA256_LEN);
	memcpy(m + o + 60, prev, LB_SHA256_LEN);
}

static int
fill_tomb(struct lb_chrec *r, const uint8_t *prev, void *arg)
{
	struct signarg	*a = arg;
	uint8_t		 m[LB_TOMB_MSG_LEN];

	if (a->k == NULL)
		return (0);	/* (signing not set up: the tombstone goes unsigned) */
	tomb_msg(m, a->ls, r, prev);
	r->level = LB_CHT_SIGNED;
	return (sign_msg(a->k, m, sizeof(m), r->sig));
}

int
lb_sign_tomb_append(const char *data, const char *daydir, const struct lb_chgen *gen,
    const char *ls, struct lb_chrec *r)
{
	struct signarg	 a = { NULL, ls, r->day, 0 };
	char		 kp[PATH_MAX];
	int		 rc;

	if ((rc = path_of(kp, sizeof(kp), data, LB_SIGN_KEY_FILE)) != 0)
		return (rc);
	if ((rc = read_key(kp, 1, &a.k)) != 0 && rc != ENOENT)
		return (rc);
	r->level = 0;
	rc = lb_chain_append_fill(daydir, gen, r, 1, 1, 0, fill_tomb, &a);
	EVP_PKEY_free(a.k);
	return (rc);
}

int
lb_sign_check_tomb(const char *pubpath, const char *ls, const struct lb_chrec *r)
{
	uint8_t		 m[LB_TOMB_MSG_LEN];
	EVP_PKEY	*k;
	int		 rc;

	/* The key first: without one, the caller learns that (not that the record is bad). */
	if ((rc = read_key(pubpath, 0, &k)) != 0)
		return (rc);
	if (!(r->level & LB_CHT_SIGNED))
		rc = LB_ECORRUPT;
	else {
		tomb_msg(m, ls, r, r->prev);
		rc = verify_with(k, m, sizeof(m), r->sig);
	}
	EVP_PKEY_free(k);
	return (rc);
}
