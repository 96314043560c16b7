/*
 * fz_segment.c — arbitrary bytes as a .seg file: open, verify, look up terms (fixed ones, ones
 * taken from the input, every term the dictionary walk yields), walk prefixes and ranges and
 * decode every id list. Whatever the bytes, the reader must return codes, not crash, leak or
 * loop; a file that verifies must also merge into a file that verifies.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "logbox.h"

struct fz {
	struct lb_segment	*sg;
	struct lb_postings	 p;
	uint64_t		 seen;
};

static int
fz_term(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	struct fz	*f = arg;
	int		 rc;

	f->p.n = 0;
	rc = lb_segment_postings(f->sg, cookie, &f->p);
	if (rc == 0 && f->p.n != df)
		abort();
	f->p.n = 0;
	if (f->seen % 16 == 0 && lb_segment_lookup(f->sg, term, len, &f->p) == 0 && rc == 0 &&
	    f->p.n != df)
		abort();
	return (++f->seen > 100000);
}

static int
fz_count(void *arg, const uint8_t *term, size_t len, uint64_t cookie, uint32_t df)
{
	(void)term; (void)len; (void)cookie; (void)df;
	return (++*(uint64_t *)arg > 100000);
}

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char	*fixed[] = { "\x01" "error", "\x01" "a", "\x02" "web-01",
	    "\x06\x03", "\x07\x06", "\x08" "ex@1.user\0" "bob", "" };
	char			 path[64], out[80];
	struct fz		 f;
	struct lb_seginfo	 si;
	char			 why[200];
	uint64_t		 n = 0;
	FILE			*fp;
	int			 ok;

	snprintf(path, sizeof(path), "/tmp/fz_segment.%d.seg", (int)getpid());
	snprintf(out, sizeof(out), "%s.merged", path);
	if ((fp = fopen(path, "wb")) == NULL)
		return (0);
	if (size > 0 && fwrite(data, 1, size, fp) != size) {
		fclose(fp);
		return (0);
	}
	fclose(fp);
	memset(&f, 0, sizeof(f));
	if (lb_segment_open(path, &f.sg) != 0)
		goto done;
	lb_segment_info(f.sg, &si);
	ok = lb_segment_verify(f.sg, why, sizeof(why)) == 0;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		size_t len = i == 5 ? 14 : strlen(fixed[i]);

		(void)lb_segment_lookup(f.sg, (const uint8_t *)fixed[i], len, &f.p);
	}
	for (size_t i = 1; i <= 16 && i <= size; i++) {
		(void)lb_segment_lookup(f.sg, data + size - i, i, &f.p);
		(void)lb_segment_prefix(f.sg, data + size - i, i < 3 ? i : 3, fz_count, &n);
	}
	if (size > 4)
		(void)lb_segment_terms(f.sg, data, 2, data + 2, 2, fz_count, &n);
	(void)lb_segment_terms(f.sg, NULL, 0, NULL, 0, fz_term, &f);
	(void)lb_segment_postings(f.sg, UINT64_MAX, &f.p);
	(void)lb_segment_postings(f.sg, 0, &f.p);
	if (ok) {
		struct lb_segment *m;

		if (lb_segment_merge(&f.sg, 1, out) != 0)
			abort();
		if (lb_segment_open(out, &m) != 0 || lb_segment_verify(m, why, sizeof(why)) != 0)
			abort();
		lb_segment_close(m);
		unlink(out);
	}
	lb_segment_close(f.sg);
 done:
	lb_postings_free(&f.p);
	unlink(path);
	return (0);
}
