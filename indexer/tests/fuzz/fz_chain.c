/*
 * fz_chain.c — a day's chain file (FORMAT.md §14) on arbitrary bytes. An input is
 * [u8 flags][the file]. With flags bit 0 the harness first makes every record's hash and
 * link match (walking the records by their lengths), so that the fuzzer also reaches the
 * structural checks behind them: kinds, body lengths, seqs, the genesis first.
 * The parser must return codes, never crash, leak or loop; the records it returns link and
 * count from 0. Then the file goes to a scratch directory: an append to it either fails or
 * leaves a file whose records are the sound ones before it plus the one appended.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "logbox.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

static char	dir[256];

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Rewrites each record's prev, hash and trailing length as a writer would have. */
static void
fix(uint8_t *b, size_t len)
{
	uint8_t		prev[LB_SHA256_LEN] = { 0 };
	unsigned int	n;
	size_t		off = 0;

	while (off + LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE <= len) {
		size_t rl = lb_get32(b + off + LB_CHR_LEN);

		if (rl < LB_CHR_HDR_SIZE + LB_CHR_TRAILER_SIZE || rl > len - off)
			break;
		if (off > 0)
			memcpy(b + off + rl - LB_CHR_TRAILER_SIZE, prev, LB_SHA256_LEN);
		EVP_Digest(b + off, rl - LB_SHA256_LEN - 4, b + off + rl - LB_SHA256_LEN - 4, &n,
		    EVP_sha256(), NULL);
		memcpy(prev, b + off + rl - LB_SHA256_LEN - 4, LB_SHA256_LEN);
		lb_put32(b + off + rl - 4, (uint32_t)rl);
		off += rl;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lb_chrec	*recs = NULL, *again = NULL, r;
	struct lb_chgen	 g = { "fz", 20250101, 0, 0, { 0 } };
	uint8_t		*b;
	size_t		 n = 0, m = 0, len;
	char		 path[300], why[256];
	int		 rc, fd;

	if (dir[0] == '\0') {
		snprintf(dir, sizeof(dir), "/tmp/fz_chain.XXXXXX");
		if (mkdtemp(dir) == NULL)
			abort();
	}
	if (size < 1)
		return (0);
	len = size - 1;
	if ((b = malloc(len + 1)) == NULL)
		abort();
	memcpy(b, data + 1, len);
	if (data[0] & 1)
		fix(b, len);
	rc = lb_chain_parse(b, len, &recs, &n, why, sizeof(why));
	for (size_t i = 0; i < n; i++) {
		if (recs[i].seq != i || (i > 0 && memcmp(recs[i].prev, recs[i - 1].hash,
		    LB_SHA256_LEN) != 0) || (i == 0) != (recs[i].kind == LB_CH_GENESIS))
			abort();
	}
	if (rc != 0 && rc != LB_ECORRUPT && rc != ENOMEM)
		abort();
	snprintf(path, sizeof(path), "%s/%s", dir, LB_FILE_CHAIN);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) == -1)
		abort();
	if (lb_write_all(fd, b, len) != 0)
		abort();
	close(fd);
	memset(&r, 0, sizeof(r));
	r.kind = LB_CH_BLOCK;
	r.first_id = 1;
	r.count = 1;
	r.len = LB_BHDR_SIZE;
	if (lb_chain_append(dir, &g, &r, 1, 0) == 0) {
		/* The sound records before it, then it: none lost, none changed. */
		if (lb_chain_load(dir, &again, &m, why, sizeof(why)) == 0) {
			if (m < 2 || again[m - 1].kind != LB_CH_BLOCK || again[m - 1].first_id != 1)
				abort();
			for (size_t i = 0; i + 1 < m && i < n; i++)
				if (memcmp(again[i].hash, recs[i].hash, LB_SHA256_LEN) != 0)
					abort();
		}
		lb_chain_free(again, m);
	}
	lb_chain_free(recs, n);
	free(b);
	return (0);
}
