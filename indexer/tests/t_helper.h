/*
 * t_helper.h — what every C unit test includes: cmocka, the small helpers more than one test
 * needs (random numbers, slices, growing arrays, the segment order of (term, id) pairs, whole
 * files), a fresh temporary directory per test that is removed afterwards, and the test
 * program's main(). A helper that one test alone uses stays in that test. Tests run from
 * indexer/tests/ (golden files are relative).
 */
#ifndef T_HELPER_H
#define T_HELPER_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "logbox.h"

/* Asserts rc == 0 and prints lb_strerror(rc) when it is not. */
#define assert_ok(rc) do {						\
	int _rc = (rc);							\
	if (_rc != 0)							\
		print_error("%s: %d %s\n", #rc, _rc, lb_strerror(_rc));	\
	assert_int_equal(_rc, 0);					\
} while (0)

/* The tests' random numbers: one xorshift64 step of *s (never 0 once seeded), returned. */
static inline uint64_t
t_rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (*s);
}

/*
 * Makes room for one more element at v[n] in a growing array of cap elements: doubles cap
 * (first: the first size) and reallocs v when n has reached it. Fails the test without memory.
 */
#define T_GROW(v, n, cap, first) do {					\
	if ((n) == (cap)) {						\
		(cap) = (cap) != 0 ? (cap) * 2 : (first);		\
		assert_non_null((v) = realloc((v), (cap) * sizeof(*(v))));	\
	}								\
} while (0)

/*
 * The order of (term, id) pairs in a segment, as the tests' oracles sort them: terms in byte
 * order (a prefix first), then ids. <0, 0 or >0.
 */
static inline int
t_term_id_cmp(const uint8_t *a, size_t alen, uint64_t aid, const uint8_t *b, size_t blen,
    uint64_t bid)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return (c);
	if (alen != blen)
		return (alen < blen ? -1 : 1);
	return (aid < bid ? -1 : aid > bid);
}

/* The bytes of the C string s, without its NUL. */
static inline struct lb_slice
t_str(const char *s)
{
	return ((struct lb_slice){ (const uint8_t *)s, strlen(s) });
}

/* Makes a fresh directory under $TMPDIR; writes its path into buf (at least 256 bytes). */
static inline void
t_mkdtemp(char *buf, size_t len)
{
	const char *t = getenv("TMPDIR");

	snprintf(buf, len, "%s/lbtest.XXXXXX", t != NULL ? t : "/tmp");
	assert_non_null(mkdtemp(buf));
}

/* The whole file at path, in memory the caller frees (with a byte to spare after *len). */
static inline uint8_t *
t_read_file(const char *path, size_t *len)
{
	FILE	*f;
	uint8_t	*b;
	long	 n;

	assert_non_null(f = fopen(path, "rb"));
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	assert_true((n = ftell(f)) >= 0);
	assert_int_equal(fseek(f, 0, SEEK_SET), 0);
	assert_non_null(b = malloc((size_t)n + 1));
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	assert_int_equal(fclose(f), 0);
	*len = (size_t)n;
	return (b);
}

/*
 * Writes b[0..len) as the file at path. A new file each time: truncating one makes ext4 flush
 * it (auto_da_alloc), which the tests that write thousands of copies cannot afford.
 */
static inline void
t_write_file(const char *path, const void *b, size_t len)
{
	FILE	*f;

	(void)remove(path);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(b, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* rm -rf dir. */
static inline void
t_rmtree(const char *dir)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* What lb_store_verify reported: its lines "path: what", and how many. */
struct t_reports {
	char	text[16384];
	size_t	len;
	int	n;
};

/* lb_store_verify's report callback: appends to the struct t_reports arg (cut to fit). */
static inline void
t_collect(void *arg, const char *path, const char *what)
{
	struct t_reports *r = arg;

	r->len += (size_t)snprintf(r->text + r->len, sizeof(r->text) - r->len, "%s: %s\n",
	    path, what);
	if (r->len >= sizeof(r->text))
		r->len = sizeof(r->text) - 1;
	r->n++;
}

/*
 * lb_store_verify of dir's logspace main into *r; with the verification key k when it is not
 * NULL; *si gets the seal information when si is not NULL. Its return value.
 */
static inline int
t_verify(const char *dir, const uint8_t *k, struct t_reports *r, struct lb_sealinfo *si)
{
	struct lb_store	*st;
	int		 rc;

	memset(r, 0, sizeof(*r));
	assert_ok(lb_store_open(dir, "main", LB_RDONLY, &st));
	if (k != NULL)
		lb_store_set_verify_key(st, k);
	rc = lb_store_verify(st, t_collect, r);
	if (si != NULL)
		lb_store_seal_info(st, si);
	lb_store_close(st);
	return (rc);
}

/*
 * The main() of a test file: runs the tests listed (cmocka_unit_test(name), ...) as one group
 * and exits with the number that failed. T_FILTER=name runs only the tests it matches
 * (cmocka's filter: * and ? wildcards).
 */
#define T_MAIN(...)	T_MAIN_SETUP(NULL, __VA_ARGS__)

/* The same, with setup (int setup(void **state)) run once before the first test. */
#define T_MAIN_SETUP(setup, ...)					\
int									\
main(void)								\
{									\
	const struct CMUnitTest tests[] = { __VA_ARGS__ };		\
									\
	if (getenv("T_FILTER") != NULL)					\
		cmocka_set_test_filter(getenv("T_FILTER"));		\
	return (cmocka_run_group_tests(tests, setup, NULL));		\
}

#endif /* T_HELPER_H */
