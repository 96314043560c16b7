/*
 * t_seal.c — forward-secure seals (FORMAT.md §14.5). The key file holds only the epoch's key:
 * the verification key K_0 is never in it, and each key is gone from the file's bytes once
 * the next one is written. A store sealed over several epochs verifies with its key; then an
 * attacker who holds the key file now (root now) tries what journald's sealing let through:
 * a seal removed, one replayed from another epoch, the tail cut after the last seal, a block
 * edited and the chain rebuilt and resealed with the key of now, the key file rolled back, and
 * each is reported (the resealing only with the verification key, as it must be).
 */
#include "t_helper.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define T0	(1735689600LL * 1000000)	/* 2025-01-01T00:00:00Z */

static int
contains(const uint8_t *hay, size_t n, const uint8_t *needle, size_t k)
{
	for (size_t i = 0; i + k <= n; i++)
		if (memcmp(hay + i, needle, k) == 0)
			return (1);
	return (0);
}

/* The key in the key file now (what root holds), and its epoch. */
static uint64_t
key_now(const char *dir, uint8_t k[LB_SEAL_KEYLEN])
{
	char		path[400];
	uint8_t		*b;
	size_t		len;
	uint64_t	e = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, LB_SEAL_FILE);
	b = t_read_file(path, &len);
	assert_int_equal(len, 2 * LB_SEAL_SLOT_SIZE);
	for (int s = 0; s < 2; s++) {
		const uint8_t *p = b + s * LB_SEAL_SLOT_SIZE;

		if (lb_get32(p + LB_SEAL_SLOT_MAGIC) == LB_SEAL_MAGIC &&
		    lb_get64(p + LB_SEAL_SLOT_EPOCH) > e) {
			e = lb_get64(p + LB_SEAL_SLOT_EPOCH);
			memcpy(k, p + LB_SEAL_SLOT_KEY, LB_SEAL_KEYLEN);
		}
	}
	free(b);
	return (e);
}

static void
mkmsg(struct lb_msg *m, char *buf, size_t len, uint64_t i)
{
	memset(m, 0, sizeof(*m));
	snprintf(buf, len, "seq=%llu word%llu unique%llu and more text to fill blocks %llx",
	    (unsigned long long)i, (unsigned long long)(i % 7), (unsigned long long)i,
	    (unsigned long long)(i * 2654435761u));
	m->message.p = (const uint8_t *)buf;
	m->message.len = strlen(buf);
	m->timestamp = LB_NOTIME;
	m->received = T0 + (int64_t)i * 1000;
}

static void
seal(const char *dir, uint64_t want)
{
	struct lb_catalog	*cat;
	uint64_t		 e;

	assert_ok(lb_catalog_open(dir, LB_RDONLY, &cat));
	assert_ok(lb_seal_run(dir, cat, 1, &e));
	lb_catalog_close(cat);
	assert_int_equal(e, want);
}

/* One day, four epochs sealed, messages appended in each. */
static void
build(const char *dir, uint8_t k0[LB_SEAL_KEYLEN])
{
	struct lb_store	*st;
	struct lb_msg	 m;
	char		 buf[160];
	uint64_t	 i = 1;

	assert_ok(lb_seal_init(dir, 1000000, k0));
	for (uint64_t e = 1; e <= 4; e++) {
		assert_ok(lb_store_open(dir, "main", LB_RDWR, &st));
		for (uint64_t end = i + 3000; i < end; i++) {
			mkmsg(&m, buf, sizeof(buf), i);
			assert_ok(lb_store_append(st, &m));
		}
		assert_ok(lb_store_close(st));
		seal(dir, e);
	}
}

static void
t_key_file(void **state)
{
	char		 dir[256], path[400];
	uint8_t		 k0[LB_SEAL_KEYLEN], k[LB_SEAL_KEYLEN], kprev[LB_SEAL_KEYLEN], t[32];
	uint8_t		*b;
	size_t		 len;
	struct lb_sealstate ss;
	struct lb_catalog *cat;
	uint64_t	 e;

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_int_equal(lb_seal_state(dir, &ss), ENOENT);
	assert_int_equal(lb_seal_init(dir, 10, k0), LB_EBADCONF);
	assert_ok(lb_seal_init(dir, 1000000, k0));
	assert_int_equal(lb_seal_init(dir, 1000000, t), EEXIST);
	assert_ok(lb_seal_state(dir, &ss));
	assert_int_equal(ss.epoch, 1);
	assert_int_equal(ss.interval, 1000000);
	snprintf(path, sizeof(path), "%s/%s", dir, LB_SEAL_FILE);
	b = t_read_file(path, &len);
	assert_false(contains(b, len, k0, sizeof(k0)));	/* K_0 shown, never kept */
	free(b);
	assert_int_equal(key_now(dir, k), 1);
	assert_ok(lb_seal_ratchet(k0, 1, t));
	assert_memory_equal(k, t, sizeof(t));
	assert_ok(lb_seal_key_check(dir, k0));
	/* Each step: the next key in, the one before gone from the file's bytes. */
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	for (uint64_t want = 1; want <= 5; want++) {
		memcpy(kprev, k, sizeof(k));
		assert_ok(lb_seal_run(dir, cat, 0, &e));
		assert_int_equal(e, 0);			/* not due yet (1 s) */
		assert_ok(lb_seal_run(dir, cat, 1, &e));
		assert_int_equal(e, want);
		assert_int_equal(key_now(dir, k), want + 1);
		assert_ok(lb_seal_ratchet(kprev, want + 1, t));
		assert_memory_equal(k, t, sizeof(t));
		b = t_read_file(path, &len);
		assert_false(contains(b, len, kprev, sizeof(kprev)));
		free(b);
	}
	lb_catalog_close(cat);
	assert_ok(lb_seal_key_check(dir, k0));
	k0[3] ^= 1;
	assert_int_equal(lb_seal_key_check(dir, k0), LB_ECORRUPT);
	assert_int_equal(lb_seal_key_parse("xyz", t), LB_EBADCONF);
	assert_ok(lb_seal_key_parse("00112233445566778899aabbccddeeff"
	    "00112233445566778899AABBCCDDEEFF\n", t));
	assert_int_equal(t[31], 0xff);
	t_rmtree(dir);
}

/*
 * Rewrites the chain of daydir as an attacker with the key of now would: every record kept
 * but those skip() drops, seals re-MAC'd with key (their epochs as edit() leaves them).
 */
struct rewrite {
	const uint8_t	*key;
	const char	*ls;
	uint32_t	 day;
};

static int
refill(struct lb_chrec *r, const uint8_t *prev, void *arg)
{
	const struct rewrite *w = arg;

	if (r->kind != LB_CH_SEAL)
		return (0);
	return (lb_seal_mac(w->key, w->ls, w->day, r->epoch, r->started, prev, r->sha));
}

static void
rewrite_chain(const char *daydir, const uint8_t key[LB_SEAL_KEYLEN], int drop_epoch,
    uint64_t replay_epoch_as, uint64_t edit_off, const uint8_t *edit_sha)
{
	struct lb_chrec	*recs, *keep;
	struct lb_chgen	 g;
	struct rewrite	 w = { key, "main", 0 };
	size_t		 n, k = 0;
	char		 path[400];

	assert_ok(lb_chain_load(daydir, &recs, &n, NULL, 0));
	assert_non_null(keep = calloc(n, sizeof(*keep)));
	memset(&g, 0, sizeof(g));
	g.ls = recs[0].ls;
	g.day = recs[0].day;
	w.day = recs[0].day;
	g.prev_day = recs[0].prev_day;
	g.prev_seq = recs[0].prev_seq;
	memcpy(g.prev, recs[0].prev, sizeof(g.prev));
	for (size_t i = 1; i < n; i++) {
		struct lb_chrec r = recs[i];

		if (r.kind == LB_CH_SEAL && drop_epoch > 0 && r.epoch == (uint64_t)drop_epoch)
			continue;
		if (r.kind == LB_CH_SEAL && replay_epoch_as > 0 && r.epoch == replay_epoch_as)
			r.epoch = 1;	/* epoch 1's seal, put in its place */
		if (r.kind == LB_CH_BLOCK && edit_sha != NULL && r.off == edit_off)
			memcpy(r.sha, edit_sha, sizeof(r.sha));
		r.repl = NULL;
		r.nrepl = 0;
		if (recs[i].nrepl > 0) {
			assert_non_null(r.repl = calloc(recs[i].nrepl, sizeof(*r.repl)));
			memcpy(r.repl, recs[i].repl, recs[i].nrepl * sizeof(*r.repl));
			r.nrepl = recs[i].nrepl;
		}
		keep[k++] = r;
	}
	snprintf(path, sizeof(path), "%s/%s", daydir, LB_FILE_CHAIN);
	assert_int_equal(unlink(path), 0);
	assert_ok(lb_chain_append_fill(daydir, &g, keep, k, 0, 0, refill, &w));
	lb_chain_free(keep, k);
	lb_chain_free(recs, n);
}

static void
expect(const char *dir, const uint8_t *k, const char *what, const char *needle)
{
	struct t_reports r;

	if (t_verify(dir, k, &r, NULL) != LB_ECORRUPT)
		fail_msg("%s: verify found nothing", what);
	if (strstr(r.text, needle) == NULL)
		fail_msg("%s: no \"%s\" in:\n%s", what, needle, r.text);
	if (getenv("T_VERBOSE") != NULL)
		fprintf(stderr, "-- %s:\n%s", what, r.text);
}

static void
t_seals_and_forgeries(void **state)
{
	char			 base[256], dir[256], cmd[1200], dd[400], path[500], save[520];
	uint8_t			 k0[LB_SEAL_KEYLEN], kn[LB_SEAL_KEYLEN], sha[32];
	struct t_reports		 r;
	struct lb_sealinfo	 si;
	struct lb_msgfile	*mf;
	struct lb_blkref	 b;
	int			 fd;

	(void)state;
	t_mkdtemp(base, sizeof(base));
	build(base, k0);
	if (t_verify(base, k0, &r, &si) != 0)
		fail_msg("sealed store:\n%s", r.text);
	assert_int_equal(si.setup, 1);
	assert_int_equal(si.first, 1);
	assert_int_equal(si.last, 4);
	assert_int_equal(si.key_epoch, 5);
	assert_true(si.checked == si.seals && si.seals >= 4);
	if (t_verify(base, NULL, &r, &si) != 0)
		fail_msg("sealed store, no key:\n%s", r.text);
	assert_int_equal(si.checked, 0);
	t_mkdtemp(dir, sizeof(dir));
	snprintf(dd, sizeof(dd), "%s/main/2025/01-01", dir);
#define FRESH() do {							\
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' && cp -a '%s' '%s'", dir, base, dir);	\
	assert_int_equal(system(cmd), 0);				\
	assert_int_equal(key_now(dir, kn), 5);				\
} while (0)

	/* A wrong verification key: the key file does not come from it, no seal verifies. */
	FRESH();
	k0[0] ^= 1;
	expect(dir, k0, "wrong key", "not the one the verification key gives");
	expect(dir, k0, "wrong key", "does not verify");
	k0[0] ^= 1;

	/* A seal removed, the chain relinked and resealed with the key of now. */
	FRESH();
	rewrite_chain(dd, kn, 2, 0, 0, NULL);
	expect(dir, NULL, "seal removed", "seals of epochs 2-2 are missing");
	expect(dir, k0, "seal removed", "does not verify");

	/* Epoch 1's seal replayed in epoch 3's place. */
	FRESH();
	rewrite_chain(dd, kn, 0, 3, 0, NULL);
	expect(dir, NULL, "seal replayed", "seals of epochs 3-3 are missing");
	expect(dir, k0, "seal replayed", "the seal of epoch 1");

	/* The tail cut after the seal of epoch 2: chain and messages. */
	FRESH();
	{
		struct lb_chrec	*recs;
		size_t		 n, cut = 0;

		assert_ok(lb_chain_load(dd, &recs, &n, NULL, 0));
		for (size_t i = 0; i < n; i++)
			if (recs[i].kind == LB_CH_SEAL && recs[i].epoch == 2)
				cut = recs[i + 1].foff;
		lb_chain_free(recs, n);
		assert_true(cut > 0);
		snprintf(path, sizeof(path), "%s/%s", dd, LB_FILE_CHAIN);
		assert_int_equal(truncate(path, (off_t)cut), 0);
	}
	expect(dir, NULL, "tail cut", "truncated: the last seal is of epoch 2, the key is at 5");

	/* A block edited, its record rewritten, the chain rebuilt and resealed with the key of
	 * now: sound to a verify without the key; the verification key names every seal. */
	FRESH();
	assert_ok(lb_msgfile_open(dd, LB_RDONLY, 0, &mf));
	lb_msgfile_block(mf, 1, &b);
	lb_msgfile_close(mf);
	snprintf(path, sizeof(path), "%s/%s", dd, LB_FILE_MESSAGES);
	assert_true((fd = open(path, O_RDWR)) != -1);
	{
		uint8_t c;

		assert_int_equal(pread(fd, &c, 1, (off_t)(b.off + b.len - 3)), 1);
		c ^= 0x10;
		assert_int_equal(pwrite(fd, &c, 1, (off_t)(b.off + b.len - 3)), 1);
	}
	assert_ok(lb_sha256_fd(fd, b.off, b.len, sha));
	close(fd);
	rewrite_chain(dd, kn, 0, 0, b.off, sha);
	if (t_verify(dir, NULL, &r, NULL) != LB_ECORRUPT || strstr(r.text, "seal") != NULL)
		fail_msg("resealed, no key: only the block's own checksum is wrong:\n%s", r.text);
	expect(dir, k0, "resealed", "the seal of epoch 1 (record");
	expect(dir, k0, "resealed", "made with another epoch's key (resealed)");

	/* The key file rolled back to an older copy (seals made after it exist). */
	FRESH();
	snprintf(path, sizeof(path), "%s/%s", dir, LB_SEAL_FILE);
	snprintf(save, sizeof(save), "%s.old", path);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, save);
	assert_int_equal(system(cmd), 0);
	seal(dir, 5);
	snprintf(cmd, sizeof(cmd), "mv '%s' '%s'", save, path);
	assert_int_equal(system(cmd), 0);
	expect(dir, NULL, "key rolled back", "the key file was replaced by an older one");

	/* The key file removed. */
	FRESH();
	snprintf(path, sizeof(path), "%s/%s", dir, LB_SEAL_FILE);
	assert_int_equal(unlink(path), 0);
	expect(dir, NULL, "key removed", "the sealing key file was removed");
#undef FRESH
	t_rmtree(dir);
	t_rmtree(base);
}

T_MAIN(
	cmocka_unit_test(t_key_file),
	cmocka_unit_test(t_seals_and_forgeries))
