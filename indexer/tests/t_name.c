/*
 * t_name.c — the logspace name rule (lb_name.c): every byte class at every position, the length
 * bounds, each reserved name and its near misses, and the catalog asking the same rule (a new
 * logspace may not take a reserved name).
 */
#include "t_helper.h"
#include "lb_format.h"

static void
t_form(void **state)
{
	char		 name[LB_NAME_MAX + 2];
	const char	*why;

	(void)state;
	assert_true(lb_logspace_name_ok("main", 4, NULL));
	assert_true(lb_logspace_name_ok("web-01_x", 8, NULL));
	assert_true(lb_logspace_name_ok("0", 1, NULL));
	for (int c = 0; c < 256; c++) {
		int good = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';

		name[0] = 'a';
		name[1] = (char)c;
		why = NULL;
		assert_int_equal(lb_logspace_name_ok(name, 2, &why), good);
		if (!good)
			assert_string_equal(why, "logspace name not [a-z0-9_-]");
	}
	/* A NUL byte inside the given length breaks the rule. */
	assert_false(lb_logspace_name_ok("ab\0c", 4, NULL));
	assert_false(lb_logspace_name_ok("Main", 4, NULL));
	assert_false(lb_logspace_name_ok("../x", 4, NULL));
}

static void
t_length(void **state)
{
	char		 name[LB_NAME_MAX + 1];
	const char	*why = NULL;

	(void)state;
	memset(name, 'x', sizeof(name));
	assert_false(lb_logspace_name_ok(name, 0, &why));
	assert_string_equal(why, "logspace name length not 1..64");
	assert_true(lb_logspace_name_ok(name, 1, NULL));
	assert_true(lb_logspace_name_ok(name, LB_NAME_MAX, NULL));
	why = NULL;
	assert_false(lb_logspace_name_ok(name, LB_NAME_MAX + 1, &why));
	assert_string_equal(why, "logspace name length not 1..64");
}

static void
t_reserved(void **state)
{
	static const char *const names[] = { LB_RESERVED_NAMES };
	char		 buf[32];
	const char	*why;

	(void)state;
	assert_int_equal(sizeof(names) / sizeof(names[0]), 7);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		size_t n = strlen(names[i]);

		why = NULL;
		assert_false(lb_logspace_name_ok(names[i], n, &why));
		assert_string_equal(why, "reserved logspace name");
		assert_true(lb_logspace_name_reserved(names[i], n));
		/* Near misses are ordinary names: a prefix, a longer name, another last byte. */
		assert_true(lb_logspace_name_ok(names[i], n - 1, NULL) || n == 1);
		assert_false(lb_logspace_name_reserved(names[i], n - 1));
		snprintf(buf, sizeof(buf), "%sx", names[i]);
		assert_true(lb_logspace_name_ok(buf, n + 1, NULL));
		assert_false(lb_logspace_name_reserved(buf, n + 1));
	}
	assert_true(lb_logspace_name_reserved(LB_DIR_CATALOG, strlen(LB_DIR_CATALOG)));
	assert_false(lb_logspace_name_reserved("main", 4));
	assert_false(lb_logspace_name_reserved("", 0));
	/* The why pointer is left alone on success. */
	why = "unchanged";
	assert_true(lb_logspace_name_ok("main", 4, &why));
	assert_string_equal(why, "unchanged");
}

static void
t_catalog(void **state)
{
	struct lb_catalog	*cat;
	struct lb_lsconf	 conf;
	char			 dir[256];

	(void)state;
	t_mkdtemp(dir, sizeof(dir));
	assert_ok(lb_catalog_open(dir, LB_RDWR, &cat));
	lb_lsconf_default(&conf);
	assert_int_equal(lb_catalog_logspace_create(cat, "catalog", &conf), LB_EBADCONF);
	assert_int_equal(lb_catalog_logspace_create(cat, "spool", &conf), LB_EBADCONF);
	assert_int_equal(lb_catalog_logspace_create(cat, "Main", &conf), LB_EBADCONF);
	assert_ok(lb_catalog_logspace_create(cat, "catalogs", &conf));
	/* Reading calls take the form only: a reserved name is simply not there. */
	assert_int_equal(lb_catalog_logspace_get(cat, "catalog", &conf), LB_ENOTFOUND);
	assert_int_equal(lb_catalog_logspace_get(cat, "Main", &conf), LB_EBADCONF);
	assert_ok(lb_catalog_logspace_get(cat, "catalogs", &conf));
	lb_catalog_close(cat);
	t_rmtree(dir);
}

T_MAIN(
	cmocka_unit_test(t_form),
	cmocka_unit_test(t_length),
	cmocka_unit_test(t_reserved),
	cmocka_unit_test(t_catalog))
