/*
 * msgfile_bench.c — the message file alone, per block method (indexer/FORMAT.md §3.8).
 *
 *   cc -O2 -Iindexer/lib -o build/msgfile_bench tests/bench/msgfile_bench.c build/liblogbox.a \
 *       -llmdb -lisal -lzstd -lz -ljansson -levent -lsystemd -lm -lpthread
 *   build/msgfile_bench CORPUS MAXBYTES METHOD DIR [PAGES]
 *
 * Parses the first MAXBYTES of CORPUS (one syslog line a line), appends every message with
 * commit(0) every 1000 and a seal into a fresh day directory DIR written with METHOD (1
 * DEFLATE, 2 zstd, 3 columns, 4 templates), receive times 3 µs apart; then prints the file's size
 * against the raw lines, the append msgs/s, the µs a get costs in a page of 100 gets in 100
 * random blocks with a fresh reader (median of PAGES pages), how many blocks each method got,
 * and checks that every message reads back exactly (body, host, program, pid, msgid, sd).
 * Then, block by block, the records compressed and decompressed again with zstd, columns and
 * templates (thread CPU time, so the compressor thread's work is what is counted): the sizes,
 * how many blocks each is the smallest for, and the CPU µs a block costs each way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "logbox.h"
#include "lb_block.h"
#include "lb_format.h"
#include "lb_util.h"

static double
now(void)
{
	struct timespec	 t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return ((double)t.tv_sec + (double)t.tv_nsec / 1e9);
}

static uint64_t rs = 88172645463325252ULL;

static uint64_t
rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return (rs);
}

static int
dcmp(const void *a, const void *b)
{
	double	 x = *(const double *)a, y = *(const double *)b;

	return (x < y ? -1 : x > y);
}

static double
cpu(void)
{
	struct timespec	 t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return ((double)t.tv_sec + (double)t.tv_nsec / 1e9);
}

/* Every block of the file m[0..len) again with zstd, columns and templates. */
static void
recode(const uint8_t *m, size_t len)
{
	static const unsigned	 meth[3] = { LB_BLK_ZSTD, LB_BLK_COLS, LB_BLK_TPL };
	struct lb_bcodec	*c = NULL;
	uint8_t			*raw = malloc(LB_BLOCK_RAW_MAX), *z = malloc(LB_BLOCK_RAW_MAX);
	uint8_t			*back = malloc(LB_BLOCK_RAW_MAX), used;
	double			 enc[3] = { 0 }, dec[3] = { 0 }, a;
	size_t			 size[3] = { 0 }, best[3] = { 0 }, minsum = 0, nb = 0, zl;
	size_t			 got[3][8];

	memset(got, 0, sizeof(got));
	for (size_t off = LB_FHDR_SIZE; off + LB_BHDR_SIZE <= len; nb++) {
		const uint8_t	*h = m + off;
		uint32_t	 rl = lb_get32(h + LB_BHDR_RAW_LEN), cl = lb_get32(h + LB_BHDR_COMP_LEN);
		size_t		 sz[3], mn;

		if (lb_block_decompress(&c, h[LB_BHDR_METHOD], h + LB_BHDR_SIZE, cl, raw, rl) != 0)
			exit(1);
		for (int k = 0; k < 3; k++) {
			a = cpu();
			if (lb_block_compress(&c, meth[k], raw, rl, z, &zl, &used) != 0)
				exit(1);
			enc[k] += cpu() - a;
			got[k][used & 7]++;
			a = cpu();
			if (lb_block_decompress(&c, used, z, zl, back, rl) != 0 ||
			    memcmp(back, raw, rl) != 0)
				exit(1);
			dec[k] += cpu() - a;
			size[k] += zl + LB_BHDR_SIZE;
			sz[k] = zl;
		}
		mn = sz[0] < sz[1] ? sz[0] : sz[1];
		mn = mn < sz[2] ? mn : sz[2];
		minsum += mn + LB_BHDR_SIZE;
		for (int k = 0; k < 3; k++)
			if (sz[k] == mn) {
				best[k]++;
				break;
			}
		off += LB_BHDR_SIZE + cl;
	}
	for (int k = 0; k < 3; k++)
		printf("  recode method=%u bytes=%zu smallest_in=%zu/%zu blocks (as zstd %zu cols %zu "
		    "tpl %zu) enc_us_block=%.0f dec_us_block=%.0f\n", meth[k], size[k], best[k], nb,
		    got[k][LB_BLK_ZSTD], got[k][LB_BLK_COLS], got[k][LB_BLK_TPL], enc[k] * 1e6 / nb,
		    dec[k] * 1e6 / nb);
	printf("  recode smallest_of_three bytes=%zu\n", minsum);
	lb_block_free(c);
	free(raw);
	free(z);
	free(back);
}

static int
same(struct lb_slice a, struct lb_slice b)
{
	return (a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0));
}

int
main(int argc, char **argv)
{
	struct lb_msgfile	*mf, *r;
	struct lb_msg		*msgs = NULL, m;
	struct stat		 st;
	FILE			*f;
	char			*line = NULL, p[600];
	uint8_t			*mb;
	uint64_t		*bf, recs = 0;
	uint32_t		*bc;
	size_t			 cap = 0, raw = 0, n = 0, mcap = 0, maxb, nb = 0, per[8] = { 0 };
	ssize_t			 l;
	double			 t0, t1, *pg;
	int			 method, pages, rc;

	if (argc < 5) {
		fprintf(stderr, "usage: msgfile_bench CORPUS MAXBYTES METHOD DIR [PAGES]\n");
		return (2);
	}
	maxb = strtoull(argv[2], NULL, 10);
	method = atoi(argv[3]);
	pages = argc > 5 ? atoi(argv[5]) : 40;
	if ((f = fopen(argv[1], "rb")) == NULL) {
		perror(argv[1]);
		return (1);
	}
	while (raw < maxb && (l = getline(&line, &cap, f)) > 0) {
		uint8_t	*c;

		if (line[l - 1] == '\n')
			l--;
		if ((c = malloc((size_t)l + 1)) == NULL)
			return (1);
		memcpy(c, line, (size_t)l);
		if (n == mcap) {
			mcap = mcap ? mcap * 2 : 4096;
			if ((msgs = realloc(msgs, mcap * sizeof(*msgs))) == NULL)
				return (1);
		}
		lb_syslog_parse(c, (size_t)l, 1700000000000000LL + (int64_t)n * 3, &msgs[n]);
		lb_msg_fit(&msgs[n]);
		msgs[n].id = 1 + n;
		raw += (size_t)l;
		n++;
	}
	fclose(f);
	free(line);
	if ((rc = lb_msgfile_open(argv[4], LB_RDWR, 1, &mf)) != 0 ||
	    (rc = lb_msgfile_set_method(mf, (unsigned)method)) != 0) {
		fprintf(stderr, "open/method: %d\n", rc);
		return (1);
	}
	t0 = now();
	for (size_t i = 0; i < n; i++) {
		if ((rc = lb_msgfile_append(mf, &msgs[i])) != 0) {
			fprintf(stderr, "append %d\n", rc);
			return (1);
		}
		if (i % 1000 == 999)
			(void)lb_msgfile_commit(mf, 0);
	}
	(void)lb_msgfile_seal(mf);
	t1 = now();
	lb_msgfile_close(mf);

	snprintf(p, sizeof(p), "%s/%s", argv[4], LB_FILE_MESSAGES);
	if (stat(p, &st) != 0 || (f = fopen(p, "rb")) == NULL)
		return (1);
	if ((mb = malloc((size_t)st.st_size)) == NULL ||
	    fread(mb, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
		return (1);
	fclose(f);
	bf = malloc(sizeof(*bf) * ((size_t)st.st_size / LB_BHDR_SIZE + 1));
	bc = malloc(sizeof(*bc) * ((size_t)st.st_size / LB_BHDR_SIZE + 1));
	if (bf == NULL || bc == NULL)
		return (1);
	for (size_t off = LB_FHDR_SIZE; off + LB_BHDR_SIZE <= (size_t)st.st_size;) {
		const uint8_t	*h = mb + off;

		bf[nb] = lb_get64(h + LB_BHDR_FIRST_ID);
		bc[nb] = lb_get32(h + LB_BHDR_COUNT);
		per[h[LB_BHDR_METHOD] & 7]++;
		recs += lb_get32(h + LB_BHDR_RAW_LEN);
		nb++;
		off += LB_BHDR_SIZE + lb_get32(h + LB_BHDR_COMP_LEN);
	}
	if ((pg = malloc(sizeof(*pg) * (size_t)pages)) == NULL)
		return (1);
	for (int k = 0; k < pages; k++) {
		uint64_t	 ids[100];
		double		 a;

		if (lb_msgfile_open(argv[4], LB_RDONLY, 0, &r) != 0)
			return (1);
		for (int j = 0; j < 100; j++) {
			size_t	 b = rnd() % nb;

			ids[j] = bf[b] + rnd() % bc[b];
		}
		a = now();
		for (int j = 0; j < 100; j++)
			if (lb_msgfile_get(r, ids[j], &m) != 0) {
				fprintf(stderr, "get %llu\n", (unsigned long long)ids[j]);
				return (1);
			}
		pg[k] = (now() - a) * 1e6 / 100;
		lb_msgfile_close(r);
	}
	qsort(pg, (size_t)pages, sizeof(*pg), dcmp);
	/* Every message back, byte for byte. */
	if (lb_msgfile_open(argv[4], LB_RDONLY, 0, &r) != 0)
		return (1);
	for (size_t i = 0; i < n; i++) {
		if ((rc = lb_msgfile_get(r, 1 + i, &m)) != 0 || !same(m.message, msgs[i].message) ||
		    !same(m.host, msgs[i].host) || !same(m.program, msgs[i].program) ||
		    !same(m.pid, msgs[i].pid) || !same(m.msgid, msgs[i].msgid) ||
		    !same(m.sd, msgs[i].sd)) {
			fprintf(stderr, "message %zu differs (%d)\n", i + 1, rc);
			return (1);
		}
	}
	lb_msgfile_close(r);
	if (getenv("RECODE") != NULL)
		recode(mb, (size_t)st.st_size);
	printf("%s method=%d msgs=%zu raw=%zu records=%llu blocks=%zu "
	    "(stored %zu zstd %zu cols %zu tpl %zu) file=%lld ratio=%.4f ingest_msg_s=%.0f "
	    "get_us_median=%.1f identical=1\n", argv[1], method, n, raw, (unsigned long long)recs, nb,
	    per[LB_BLK_STORED], per[LB_BLK_ZSTD], per[LB_BLK_COLS], per[LB_BLK_TPL],
	    (long long)st.st_size, (double)st.st_size / (double)raw, (double)n / (t1 - t0),
	    pg[pages / 2]);
	return (0);
}
