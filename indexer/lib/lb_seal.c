/*
 * lb_seal.c — forward-secure seals (FORMAT.md §14.5). A key K_e evolves one way each epoch,
 * K_{e+1} = HMAC-SHA256(K_e, "LBRATCHET1" || e + 1), and the old key is overwritten in place.
 * Each epoch every logspace's chains get a seal record: the chain head at that moment, MAC'd
 * with K_e. K_0, the verification key, is handed to the admin when sealing is set up and never
 * stored: the key file starts at epoch 1. Whoever takes the box at epoch t holds K_t and can
 * derive later keys but no earlier one, so seals before t cannot be forged or redone.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "logbox.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

struct skey {
	uint64_t	epoch;
	int64_t		started;	/* µs: when the epoch began */
	uint64_t	interval;	/* µs: an epoch's length */
	uint8_t		key[LB_SEAL_KEYLEN];
};

static int64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

static int
hmac(const uint8_t key[LB_SEAL_KEYLEN], const uint8_t *msg, size_t len,
    uint8_t out[LB_SHA256_LEN])
{
	unsigned int n = 0;

	if (HMAC(EVP_sha256(), key, LB_SEAL_KEYLEN, msg, len, out, &n) == NULL ||
	    n != LB_SHA256_LEN)
		return (ENOMEM);
	return (0);
}

int
lb_seal_ratchet(const uint8_t k[LB_SEAL_KEYLEN], uint64_t next, uint8_t out[LB_SEAL_KEYLEN])
{
	uint8_t m[LB_SEAL_RATCHET_TAG_LEN + 8];

	memcpy(m, LB_SEAL_RATCHET_TAG, LB_SEAL_RATCHET_TAG_LEN);
	lb_put64(m + LB_SEAL_RATCHET_TAG_LEN, next);
	return (hmac(k, m, sizeof(m), out));
}

int
lb_seal_mac(const uint8_t k[LB_SEAL_KEYLEN], const char *ls, uint32_t day, uint64_t epoch,
    int64_t started, const uint8_t prev[LB_SHA256_LEN], uint8_t out[LB_SHA256_LEN])
{
	uint8_t m[LB_SEAL_MAC_TAG_LEN + 64 + 4 + 8 + 8 + LB_SHA256_LEN];
	size_t	o = LB_SEAL_MAC_TAG_LEN;

	memset(m, 0, sizeof(m));
	memcpy(m, LB_SEAL_MAC_TAG, LB_SEAL_MAC_TAG_LEN);
	memcpy(m + o, ls, strnlen(ls, 64));
	o += 64;
	lb_put32(m + o, day);
	lb_put64(m + o + 4, epoch);
	lb_put64(m + o + 12, (uint64_t)started);
	memcpy(m + o + 20, prev, LB_SHA256_LEN);
	return (hmac(k, m, sizeof(m), out));
}

/* ---------------------------------------------------------------- the key file */

static int
key_path(char *buf, size_t len, const char *data)
{
	return (lb_path(buf, len, "%s/%s", data, LB_SEAL_FILE));
}

static void
slot_put(uint8_t *p, const struct skey *k)
{
	memset(p, 0, LB_SEAL_SLOT_SIZE);
	lb_put32(p + LB_SEAL_SLOT_MAGIC, LB_SEAL_MAGIC);
	lb_put32(p + LB_SEAL_SLOT_VERSION, LB_SEAL_VERSION);
	lb_put64(p + LB_SEAL_SLOT_EPOCH, k->epoch);
	lb_put64(p + LB_SEAL_SLOT_STARTED, (uint64_t)k->started);
	lb_put64(p + LB_SEAL_SLOT_INTERVAL, k->interval);
	memcpy(p + LB_SEAL_SLOT_KEY, k->key, LB_SEAL_KEYLEN);
	lb_put32(p + LB_SEAL_SLOT_CRC, lb_crc32(p, LB_SEAL_SLOT_CRC));
}

static int
slot_get(const uint8_t *p, struct skey *k)
{
	if (lb_get32(p + LB_SEAL_SLOT_MAGIC) != LB_SEAL_MAGIC ||
	    lb_get32(p + LB_SEAL_SLOT_CRC) != lb_crc32(p, LB_SEAL_SLOT_CRC))
		return (LB_ECORRUPT);
	if (lb_get32(p + LB_SEAL_SLOT_VERSION) != LB_SEAL_VERSION)
		return (LB_EFORMAT);
	k->epoch = lb_get64(p + LB_SEAL_SLOT_EPOCH);
	k->started = (int64_t)lb_get64(p + LB_SEAL_SLOT_STARTED);
	k->interval = lb_get64(p + LB_SEAL_SLOT_INTERVAL);
	memcpy(k->key, p + LB_SEAL_SLOT_KEY, LB_SEAL_KEYLEN);
	return (0);
}

/* The current key of the open file fd: the sound slot with the higher epoch; *slot its index. */
static int
key_read(int fd, struct skey *k, int *slot)
{
	uint8_t		b[2 * LB_SEAL_SLOT_SIZE];
	struct skey	a, c;
	int		ra, rc, rr;

	if ((rr = lb_pread_all(fd, b, sizeof(b), 0)) != 0)
		return (rr == LB_ECORRUPT ? LB_ECORRUPT : rr);
	ra = slot_get(b, &a);
	rc = slot_get(b + LB_SEAL_SLOT_SIZE, &c);
	if (ra != 0 && rc != 0)
		rr = ra == LB_EFORMAT || rc == LB_EFORMAT ? LB_EFORMAT : LB_ECORRUPT;
	else if (rc != 0 || (ra == 0 && a.epoch > c.epoch)) {
		*k = a;
		*slot = 0;
	} else {
		*k = c;
		*slot = 1;
	}
	OPENSSL_cleanse(&a, sizeof(a));
	OPENSSL_cleanse(&c, sizeof(c));
	OPENSSL_cleanse(b, sizeof(b));
	return (rr);
}

/*
 * Writes k to the slot that is not the current one, makes it durable, then overwrites the old
 * slot with zeros: after it returns, the old key is gone from the file's blocks.
 */
static int
key_write(int fd, const struct skey *k, int cur)
{
	uint8_t	b[LB_SEAL_SLOT_SIZE];
	int	rc;

	slot_put(b, k);
	rc = lb_pwrite_all(fd, b, sizeof(b), (uint64_t)(1 - cur) * LB_SEAL_SLOT_SIZE);
	if (rc == 0 && fdatasync(fd) == -1)
		rc = errno;
	memset(b, 0, sizeof(b));
	if (rc == 0)
		rc = lb_pwrite_all(fd, b, sizeof(b), (uint64_t)cur * LB_SEAL_SLOT_SIZE);
	if (rc == 0 && fdatasync(fd) == -1)
		rc = errno;
	return (rc);
}

int
lb_seal_init(const char *data, uint64_t interval_us, uint8_t vkey[LB_SEAL_KEYLEN])
{
	struct skey	k;
	uint8_t		b[2 * LB_SEAL_SLOT_SIZE];
	char		path[PATH_MAX], dir[PATH_MAX];
	int		fd, rc;

	if (interval_us < LB_SEAL_INTERVAL_MIN || interval_us > LB_SEAL_INTERVAL_MAX)
		return (LB_EBADCONF);
	if ((rc = key_path(path, sizeof(path), data)) != 0 ||
	    (rc = lb_path(dir, sizeof(dir), "%s/%s", data, LB_DIR_INDEXD)) != 0 ||
	    (rc = lb_mkdirs(dir)) != 0)
		return (rc);
	if (getrandom(vkey, LB_SEAL_KEYLEN, 0) != LB_SEAL_KEYLEN)
		return (errno != 0 ? errno : EIO);
	memset(&k, 0, sizeof(k));
	k.epoch = 1;
	k.started = now_us();
	k.interval = interval_us;
	if ((rc = lb_seal_ratchet(vkey, 1, k.key)) != 0)
		return (rc);
	if ((fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) == -1)
		return (errno);
	memset(b, 0, sizeof(b));
	slot_put(b, &k);
	OPENSSL_cleanse(&k, sizeof(k));
	rc = lb_write_all(fd, b, sizeof(b));
	OPENSSL_cleanse(b, sizeof(b));
	if (rc == 0 && fsync(fd) == -1)
		rc = errno;
	close(fd);
	if (rc == 0)
		rc = lb_fsync_dir(dir);
	if (rc != 0)
		unlink(path);
	return (rc);
}

/* The key file of data, read (no lock: a seal run writes the other slot first). */
static int
key_load(const char *data, struct skey *k)
{
	char	path[PATH_MAX];
	int	fd, rc, slot;

	if ((rc = key_path(path, sizeof(path), data)) != 0)
		return (rc);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (errno);
	rc = key_read(fd, k, &slot);
	close(fd);
	return (rc);
}

int
lb_seal_state(const char *data, struct lb_sealstate *s)
{
	struct skey	k;
	int		rc;

	if ((rc = key_load(data, &k)) == 0) {
		s->epoch = k.epoch;
		s->started = k.started;
		s->interval = k.interval;
	}
	OPENSSL_cleanse(&k, sizeof(k));
	return (rc);
}

/* ---------------------------------------------------------------- sealing */

struct sealarg {
	const struct skey	*k;
	const char		*ls;
	uint32_t		 day;
};

static int
fill_seal(struct lb_chrec *r, const uint8_t prev[LB_SHA256_LEN], void *arg)
{
	const struct sealarg *a = arg;

	r->epoch = a->k->epoch;
	r->started = a->k->started;
	return (lb_seal_mac(a->k->key, a->ls, a->day, a->k->epoch, a->k->started, prev, r->sha));
}

/* Seals logspace ls's days with k: each chain whose last record is not a seal, and the newest. */
static int
seal_ls(const char *data, struct lb_catalog *cat, const char *ls, const struct skey *k)
{
	struct lb_dayref	*days = NULL;
	struct lb_chrec		 r;
	struct lb_chgen		 g;
	struct sealarg		 a = { k, ls, 0 };
	size_t			 n = 0;
	char			 dir[PATH_MAX];
	int			 rc;

	if ((rc = lb_catalog_days(cat, ls, &days, &n)) != 0)
		return (rc);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct stat sb;

		if ((rc = lb_day_dir(dir, sizeof(dir), data, ls, days[i].day)) != 0)
			break;
		if (stat(dir, &sb) == -1)
			continue;	/* (named before its directory exists: nothing to seal) */
		memset(&g, 0, sizeof(g));
		g.ls = ls;
		g.day = days[i].day;
		if (i > 0) {
			char pd[PATH_MAX];

			g.prev_day = days[i - 1].day;
			if (lb_day_dir(pd, sizeof(pd), data, ls, g.prev_day) == 0 &&
			    lb_chain_head(pd, &g.prev_seq, g.prev) != 0) {
				g.prev_seq = 0;
				memset(g.prev, 0, sizeof(g.prev));
			}
		}
		memset(&r, 0, sizeof(r));
		r.kind = LB_CH_SEAL;
		a.day = days[i].day;
		rc = lb_chain_append_fill(dir, &g, &r, 1, 1, i + 1 < n, fill_seal, &a);
	}
	free(days);
	return (rc);
}

int
lb_seal_run(const char *data, struct lb_catalog *cat, int force, uint64_t *sealed)
{
	char		(*names)[LB_NAME_MAX + 1] = NULL;
	size_t		 nnames = 0;
	struct skey	 k, next;
	char		 path[PATH_MAX];
	int64_t		 now = now_us();
	int		 fd, rc, slot;

	*sealed = 0;
	memset(&k, 0, sizeof(k));
	memset(&next, 0, sizeof(next));
	if ((rc = key_path(path, sizeof(path), data)) != 0)
		return (rc);
	if ((fd = open(path, O_RDWR | O_CLOEXEC)) == -1)
		return (errno);
	if (flock(fd, LOCK_EX) == -1) {
		rc = errno;
		close(fd);
		return (rc);
	}
	if ((rc = key_read(fd, &k, &slot)) != 0)
		goto done;
	if (!force && now - k.started < (int64_t)k.interval)
		goto done;
	if ((rc = lb_catalog_logspace_names(cat, &names, &nnames)) != 0)
		goto done;
	/* (The names first: a chain append is no place for the catalog's read transaction.) */
	for (size_t i = 0; i < nnames && rc == 0; i++)
		rc = seal_ls(data, cat, names[i], &k);
	if (rc != 0)
		goto done;
	next.epoch = k.epoch + 1;
	next.started = now;
	next.interval = k.interval;
	if ((rc = lb_seal_ratchet(k.key, next.epoch, next.key)) != 0 ||
	    (rc = key_write(fd, &next, slot)) != 0)
		goto done;
	*sealed = k.epoch;
 done:
	OPENSSL_cleanse(&k, sizeof(k));
	OPENSSL_cleanse(&next, sizeof(next));
	free(names);
	close(fd);
	return (rc);
}

int
lb_seal_key_parse(const char *text, uint8_t k[LB_SEAL_KEYLEN])
{
	size_t n = strlen(text);

	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' '))
		n--;
	if (n != 2 * LB_SEAL_KEYLEN)
		return (LB_EBADCONF);
	for (size_t i = 0; i < LB_SEAL_KEYLEN; i++) {
		int hi = lb_hexval((unsigned char)text[2 * i]);
		int lo = lb_hexval((unsigned char)text[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return (LB_EBADCONF);
		k[i] = (uint8_t)(hi << 4 | lo);
	}
	return (0);
}

int
lb_seal_key_check(const char *data, const uint8_t k0[LB_SEAL_KEYLEN])
{
	struct skey	k;
	uint8_t		d[LB_SEAL_KEYLEN], t[LB_SEAL_KEYLEN];
	int		rc;

	if ((rc = key_load(data, &k)) != 0)
		return (rc);
	memcpy(d, k0, sizeof(d));
	for (uint64_t e = 1; e <= k.epoch && rc == 0; e++) {
		rc = lb_seal_ratchet(d, e, t);
		memcpy(d, t, sizeof(d));
	}
	if (rc == 0 && CRYPTO_memcmp(d, k.key, sizeof(d)) != 0)
		rc = LB_ECORRUPT;
	OPENSSL_cleanse(&k, sizeof(k));
	OPENSSL_cleanse(d, sizeof(d));
	OPENSSL_cleanse(t, sizeof(t));
	return (rc);
}
