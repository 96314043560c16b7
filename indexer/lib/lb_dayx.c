/*
 * lb_dayx.c — a day's catalog extract (indexer/ARCHIVE.md §3, `catalog.json`): what the catalog
 * knows of one day of a logspace (its day record, segments and time-map entries), read from the
 * catalog, written as JSON and read back. The archive keeps it beside the day's files, and
 * `logbox archive import` gives it to lb_catalog_day_import. This file is the one owner of that
 * JSON's layout.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "logbox.h"
#include "lb_format.h"
#include "lb_archive.h"

/* JSON numbers are exact to 2^53: ids and sizes past that are decimal strings. */
static json_t *
j_u64(uint64_t v)
{
	char b[24];

	if (v <= (1ULL << 53))
		return (json_integer((json_int_t)v));
	snprintf(b, sizeof(b), "%" PRIu64, v);
	return (json_string(b));
}

static json_t *
j_time(int64_t t)
{
	return (t == LB_NOTIME ? json_null() : json_integer((json_int_t)t));
}

void
lb_dayx_free(struct lb_dayx *x)
{
	free(x->segs);
	free(x->t);
	free(x->ids);
	memset(x, 0, sizeof(*x));
}

int
lb_dayx_load(struct lb_catalog *cat, const char *ls, uint32_t day, struct lb_dayx *x)
{
	struct lb_dayref	*days = NULL;
	struct lb_segref	*segs = NULL;
	size_t			 n = 0, nseg = 0, k = 0;
	int			 rc;

	memset(x, 0, sizeof(*x));
	if (strlen(ls) > LB_NAME_MAX)
		return (LB_EBADCONF);
	snprintf(x->ls, sizeof(x->ls), "%s", ls);
	if ((rc = lb_catalog_days(cat, ls, &days, &n)) != 0)
		return (rc);
	rc = LB_ENOTFOUND;
	for (size_t i = 0; i < n; i++)
		if (days[i].day == day) {
			x->day = days[i];
			rc = 0;
		}
	free(days);
	if (rc != 0)
		return (rc);
	if (x->day.next_id > x->day.first_id) {
		if ((rc = lb_catalog_segments(cat, ls, x->day.first_id, x->day.next_id - 1, &segs,
		    &nseg)) != 0)
			return (rc);
		/* (only the day's: a neighbour's segment never overlaps its ids, but be exact) */
		for (size_t i = 0; i < nseg; i++)
			if (segs[i].day == day)
				segs[k++] = segs[i];
		x->segs = segs;
		x->nseg = k;
	}
	if ((rc = lb_catalog_day_timemap(cat, ls, &x->day, &x->t, &x->ids, &x->nt)) != 0) {
		lb_dayx_free(x);
		return (rc);
	}
	return (0);
}

int
lb_dayx_format(const struct lb_dayx *x, char **out)
{
	json_t	*segs = json_array(), *tm = json_array(), *root;
	char	 date[16];

	if (segs == NULL || tm == NULL) {
		json_decref(segs);
		json_decref(tm);
		return (ENOMEM);
	}
	for (size_t i = 0; i < x->nseg; i++) {
		const struct lb_segref *s = &x->segs[i];

		json_array_append_new(segs, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:i,s:s}",
		    "first_id", j_u64(s->first_id), "last_id", j_u64(s->last_id), "count",
		    j_u64(s->count), "tmin", j_time(s->tmin), "tmax", j_time(s->tmax), "size",
		    j_u64(s->size), "level", (json_int_t)s->level, "file", s->file));
	}
	for (size_t i = 0; i < x->nt; i++)
		json_array_append_new(tm, json_pack("[I,o]", (json_int_t)x->t[i], j_u64(x->ids[i])));
	snprintf(date, sizeof(date), "%04u-%02u-%02u", x->day.day / 10000, x->day.day / 100 % 100,
	    x->day.day % 100);
	root = json_pack("{s:i,s:s,s:i,s:s,s:{s:o,s:o,s:o,s:o},s:o,s:o}",
	    "format", LB_DAYX_FORMAT, "logspace", x->ls, "day", (json_int_t)x->day.day,
	    "date", date, "dayref", "first_id", j_u64(x->day.first_id), "next_id",
	    j_u64(x->day.next_id), "tmin", j_time(x->day.tmin), "tmax", j_time(x->day.tmax),
	    "segments", segs, "timemap", tm);
	if (root == NULL)
		return (ENOMEM);
	*out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return (*out == NULL ? ENOMEM : 0);
}

/* ---------------------------------------------------------------- parse */

static int
get_u64(json_t *o, const char *k, uint64_t *v)
{
	return (lb_dayx_u64(json_object_get(o, k), v));
}

/* A number of the extract's kind: an integer, or (above 2^53) a string of decimal digits. */
int
lb_dayx_u64(json_t *j, uint64_t *v)
{
	const char	*s;
	char		*end;
	unsigned long long x;

	if (json_is_integer(j) && json_integer_value(j) >= 0) {
		*v = (uint64_t)json_integer_value(j);
		return (0);
	}
	if (!json_is_string(j))
		return (-1);
	s = json_string_value(j);
	if (*s < '0' || *s > '9')
		return (-1);
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return (-1);
	*v = x;
	return (0);
}

static int
get_time(json_t *o, const char *k, int64_t *v)
{
	json_t *j = json_object_get(o, k);

	if (json_is_null(j)) {
		*v = LB_NOTIME;
		return (0);
	}
	if (!json_is_integer(j) || json_integer_value(j) == LB_NOTIME)
		return (-1);
	*v = (int64_t)json_integer_value(j);
	return (0);
}

#define BAD(...) do { snprintf(why, whylen, __VA_ARGS__); goto bad; } while (0)

int
lb_dayx_parse(const char *text, size_t len, struct lb_dayx *x, char *why, size_t whylen)
{
	json_error_t	 jerr;
	json_t		*root, *jd, *js, *jt, *e, *ls, *f;
	size_t		 i;

	memset(x, 0, sizeof(*x));
	if ((root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL) {
		snprintf(why, whylen, "not JSON: %s (line %d)", jerr.text, jerr.line);
		return (LB_ECORRUPT);
	}
	if (!json_is_object(root))
		BAD("not a JSON object");
	if (!json_is_integer(json_object_get(root, "format")) ||
	    json_integer_value(json_object_get(root, "format")) != LB_DAYX_FORMAT)
		BAD("format is not %d", LB_DAYX_FORMAT);
	ls = json_object_get(root, "logspace");
	if (!json_is_string(ls) || !lb_logspace_name_ok(json_string_value(ls),
	    json_string_length(ls), NULL))
		BAD("logspace: not a logspace name");
	snprintf(x->ls, sizeof(x->ls), "%s", json_string_value(ls));
	e = json_object_get(root, "day");
	if (!json_is_integer(e) || json_integer_value(e) < 0 ||
	    json_integer_value(e) > UINT32_MAX || !lb_day_ok((uint32_t)json_integer_value(e)))
		BAD("day: not a day (YYYYMMDD)");
	x->day.day = (uint32_t)json_integer_value(e);
	jd = json_object_get(root, "dayref");
	js = json_object_get(root, "segments");
	jt = json_object_get(root, "timemap");
	if (!json_is_object(jd) || !json_is_array(js) || !json_is_array(jt))
		BAD("dayref, segments and timemap are needed");
	if (get_u64(jd, "first_id", &x->day.first_id) != 0 ||
	    get_u64(jd, "next_id", &x->day.next_id) != 0 ||
	    get_time(jd, "tmin", &x->day.tmin) != 0 || get_time(jd, "tmax", &x->day.tmax) != 0)
		BAD("dayref: first_id, next_id (ids), tmin, tmax (µs or null) are needed");
	if (x->day.first_id == 0 || x->day.next_id < x->day.first_id ||
	    x->day.next_id == UINT64_MAX)
		BAD("dayref: ids %" PRIu64 " to %" PRIu64 " are not a day's", x->day.first_id,
		    x->day.next_id);
	x->nseg = json_array_size(js);
	if (x->nseg > 0 && (x->segs = calloc(x->nseg, sizeof(*x->segs))) == NULL)
		BAD("out of memory");
	json_array_foreach(js, i, e) {
		struct lb_segref	*s = &x->segs[i];
		uint64_t		 level;

		if (!json_is_object(e) || get_u64(e, "first_id", &s->first_id) != 0 ||
		    get_u64(e, "last_id", &s->last_id) != 0 ||
		    get_u64(e, "count", &s->count) != 0 || get_time(e, "tmin", &s->tmin) != 0 ||
		    get_time(e, "tmax", &s->tmax) != 0 || get_u64(e, "size", &s->size) != 0 ||
		    get_u64(e, "level", &level) != 0 || level > UINT32_MAX)
			BAD("segment %zu: first_id, last_id, count, tmin, tmax, size, level needed",
			    i);
		s->level = (uint32_t)level;
		s->day = x->day.day;
		f = json_object_get(e, "file");
		if (!json_is_string(f) || json_string_length(f) == 0 ||
		    json_string_length(f) >= sizeof(s->file) ||
		    strlen(json_string_value(f)) != json_string_length(f) ||
		    strchr(json_string_value(f), '/') != NULL ||
		    strcmp(json_string_value(f), "..") == 0 || strcmp(json_string_value(f), ".") == 0)
			BAD("segment %zu: file: a file name of 1 to %zu bytes, no /", i,
			    sizeof(s->file) - 1);
		snprintf(s->file, sizeof(s->file), "%s", json_string_value(f));
		if (s->first_id < x->day.first_id || s->last_id < s->first_id ||
		    s->last_id >= x->day.next_id)
			BAD("segment %zu: ids %" PRIu64 " to %" PRIu64 " are not in the day's", i,
			    s->first_id, s->last_id);
	}
	x->nt = json_array_size(jt);
	if (x->nt > 0 && ((x->t = calloc(x->nt, sizeof(*x->t))) == NULL ||
	    (x->ids = calloc(x->nt, sizeof(*x->ids))) == NULL))
		BAD("out of memory");
	json_array_foreach(jt, i, e) {
		json_t *a = json_array_get(e, 0);

		if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(a) ||
		    json_integer_value(a) == LB_NOTIME)
			BAD("timemap entry %zu: [time µs, id] expected", i);
		x->t[i] = (int64_t)json_integer_value(a);
		{
			json_t *wrap = json_pack("{s:O}", "id", json_array_get(e, 1));

			if (wrap == NULL || get_u64(wrap, "id", &x->ids[i]) != 0) {
				json_decref(wrap);
				BAD("timemap entry %zu: [time µs, id] expected", i);
			}
			json_decref(wrap);
		}
		if (x->ids[i] < x->day.first_id || x->ids[i] >= x->day.next_id)
			BAD("timemap entry %zu: id %" PRIu64 " is not the day's", i, x->ids[i]);
	}
	json_decref(root);
	return (0);
 bad:
	json_decref(root);
	free(x->segs);
	free(x->t);
	free(x->ids);
	memset(x, 0, sizeof(*x));
	return (LB_ECORRUPT);
}
