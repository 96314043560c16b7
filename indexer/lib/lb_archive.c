/*
 * lb_archive.c — reading archived days in place (indexer/ARCHIVE.md §7): the days of a
 * logspace that logbox-archive verified in its object store and that are no longer on local
 * disk, their catalog records, and their files read through ranged GETs into a bounded local
 * cache of pieces (LRU). The store (lb_store.c, lb_store_search.c) asks it for the days, their
 * segments and time map, and for segment and message-file readers whose bytes come from here.
 * It does not upload, verify or delete anything in the object store (logbox-archive does).
 *
 * The one idea: nothing fetched is used before its SHA-256 matches what the verified record
 * says. A segment is read in pieces (each piece's SHA-256 is in the record), a message block
 * whole (its SHA-256 is in the day's chain, itself checked whole), the catalog extract and the
 * chain whole. The cache keeps checked pieces under their SHA-256 and checks them again when
 * it reads them, so a damaged cache file is fetched anew and never served.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "logbox.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"
#include "lb_archive.h"

#define CURLS_MAX	16		/* kept-alive connections a cache keeps */
#define CONNECT_TIMEOUT_MS 5000L
#define LOW_SPEED_BYTES	1024L		/* a GET slower than this ... */
#define LOW_SPEED_SECS	30L		/* ... for this long fails */
#define FETCH_RUN_MAX	(8ULL << 20)	/* bytes of pieces one GET asks for, at most */
#define SIZE_MAX_FILE	(1ULL << 53)	/* a file's size in a verified record, at most */
#define PIECE_MAX	(64u << 20)	/* a piece's size in a verified record, at most */

/* ---------------------------------------------------------------- the piece cache */

struct centry {
	uint8_t		 sha[32];
	uint64_t	 size;
	uint64_t	 used;		/* LRU stamp; 0: a free slot */
};

struct lb_acache {
	char		 dir[PATH_MAX];
	uint64_t	 budget;
	pthread_mutex_t	 mu;
	struct centry	*tab;		/* open addressing by the SHA-256's first bytes */
	size_t		 cap, n;
	uint64_t	 bytes, clock;
	CURL		*curls[CURLS_MAX];	/* idle handles (their connections kept alive) */
	size_t		 ncurl;
};

static void
hex(const uint8_t *b, size_t n, char *out)
{
	static const char d[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = d[b[i] >> 4];
		out[2 * i + 1] = d[b[i] & 15];
	}
	out[2 * n] = '\0';
}

static int
unhex(const char *s, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = lb_hexval((unsigned char)s[2 * i]);
		int lo = hi < 0 ? -1 : lb_hexval((unsigned char)s[2 * i + 1]);

		if (lo < 0)
			return (-1);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (s[2 * n] == '\0' ? 0 : -1);
}

static size_t
slot_of(const struct lb_acache *c, const uint8_t sha[32])
{
	uint64_t h;

	memcpy(&h, sha, sizeof(h));
	return ((size_t)(h % c->cap));
}

/* The entry of sha, or NULL. Under mu. */
static struct centry *
cfind(struct lb_acache *c, const uint8_t sha[32])
{
	if (c->cap == 0)
		return (NULL);
	for (size_t i = slot_of(c, sha), k = 0; k < c->cap; i = (i + 1) % c->cap, k++) {
		if (c->tab[i].used == 0)
			return (NULL);
		if (memcmp(c->tab[i].sha, sha, 32) == 0)
			return (&c->tab[i]);
	}
	return (NULL);
}

static int cput(struct lb_acache *c, const uint8_t sha[32], uint64_t size);

static int
cgrow(struct lb_acache *c)
{
	struct centry	*old = c->tab;
	size_t		 ocap = c->cap;

	c->cap = ocap == 0 ? 1024 : ocap * 2;
	if ((c->tab = calloc(c->cap, sizeof(*c->tab))) == NULL) {
		c->tab = old;
		c->cap = ocap;
		return (ENOMEM);
	}
	c->n = 0;
	c->bytes = 0;
	for (size_t i = 0; i < ocap; i++) {
		if (old[i].used != 0) {
			uint64_t used = old[i].used;

			(void)cput(c, old[i].sha, old[i].size);
			cfind(c, old[i].sha)->used = used;
		}
	}
	free(old);
	return (0);
}

/* Adds (or refreshes) an entry. Under mu. */
static int
cput(struct lb_acache *c, const uint8_t sha[32], uint64_t size)
{
	struct centry	*e;
	size_t		 i;
	int		 rc;

	if ((e = cfind(c, sha)) != NULL) {
		e->used = ++c->clock;
		return (0);
	}
	if ((c->n + 1) * 4 > c->cap * 3 && (rc = cgrow(c)) != 0)
		return (rc);
	for (i = slot_of(c, sha); c->tab[i].used != 0; i = (i + 1) % c->cap)
		;
	memcpy(c->tab[i].sha, sha, 32);
	c->tab[i].size = size;
	c->tab[i].used = ++c->clock;
	c->n++;
	c->bytes += size;
	return (0);
}

/* Removes entry e (and its file). Under mu. Re-inserts the cluster after it. */
static void
cdel(struct lb_acache *c, struct centry *e)
{
	char	path[PATH_MAX], h[65];
	size_t	i = (size_t)(e - c->tab);

	hex(e->sha, 32, h);
	if (lb_path(path, sizeof(path), "%s/%s", c->dir, h) == 0)
		(void)unlink(path);
	c->bytes -= e->size;
	c->n--;
	c->tab[i].used = 0;
	for (size_t j = (i + 1) % c->cap; c->tab[j].used != 0; j = (j + 1) % c->cap) {
		struct centry m = c->tab[j];

		c->tab[j].used = 0;
		c->n--;
		c->bytes -= m.size;
		(void)cput(c, m.sha, m.size);
		cfind(c, m.sha)->used = m.used;
	}
}

/* Drops least recently used pieces until the cache fits its budget. Under mu. */
static void
cevict(struct lb_acache *c, const uint8_t keep[32])
{
	while (c->bytes > c->budget && c->n > 0) {
		struct centry *lru = NULL;

		for (size_t i = 0; i < c->cap; i++) {
			struct centry *e = &c->tab[i];

			if (e->used != 0 && (keep == NULL || memcmp(e->sha, keep, 32) != 0) &&
			    (lru == NULL || e->used < lru->used))
				lru = e;
		}
		if (lru == NULL)
			break;
		cdel(c, lru);
	}
}

int
lb_acache_open(const char *dir, uint64_t budget, struct lb_acache **out)
{
	struct lb_acache	*c;
	struct dirent		*de;
	struct stat		 st;
	DIR			*d;
	uint8_t			 sha[32];
	char			 path[PATH_MAX];
	int			 rc;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		return (EIO);
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return (ENOMEM);
	if ((rc = lb_path(c->dir, sizeof(c->dir), "%s", dir)) != 0) {
		free(c);
		return (rc);
	}
	c->budget = budget;
	pthread_mutex_init(&c->mu, NULL);
	/* Its parents as the store makes directories; itself for this process only. */
	if (strrchr(c->dir, '/') != NULL && strrchr(c->dir, '/') != c->dir) {
		char parent[PATH_MAX];

		memcpy(parent, c->dir, (size_t)(strrchr(c->dir, '/') - c->dir));
		parent[strrchr(c->dir, '/') - c->dir] = '\0';
		if ((rc = lb_mkdirs(parent)) != 0)
			goto fail;
	}
	if (mkdir(dir, 0700) == -1 && errno != EEXIST) {
		rc = errno;
		goto fail;
	}
	if ((d = opendir(dir)) == NULL) {
		rc = errno;
		goto fail;
	}
	/* What an earlier run left: checked pieces by their SHA-256, oldest first out. */
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (lb_path(path, sizeof(path), "%s/%s", dir, de->d_name) != 0)
			continue;
		if (unhex(de->d_name, sha, 32) != 0) {
			if (strstr(de->d_name, ".tmp") != NULL)
				(void)unlink(path);
			continue;
		}
		if (stat(path, &st) == -1 || !S_ISREG(st.st_mode))
			continue;
		if ((rc = cput(c, sha, (uint64_t)st.st_size)) != 0) {
			closedir(d);
			goto fail;
		}
		/* (the stamp: seconds of its last use, so the order survives a restart) */
		cfind(c, sha)->used = (uint64_t)st.st_mtime;
		if ((uint64_t)st.st_mtime > c->clock)
			c->clock = (uint64_t)st.st_mtime;
	}
	closedir(d);
	cevict(c, NULL);
	*out = c;
	return (0);
 fail:
	lb_acache_close(c);
	return (rc);
}

void
lb_acache_close(struct lb_acache *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->ncurl; i++)
		curl_easy_cleanup(c->curls[i]);
	pthread_mutex_destroy(&c->mu);
	free(c->tab);
	free(c);
}

void
lb_acache_usage(struct lb_acache *c, uint64_t *bytes, uint64_t *pieces)
{
	pthread_mutex_lock(&c->mu);
	*bytes = c->bytes;
	*pieces = c->n;
	pthread_mutex_unlock(&c->mu);
}

/*
 * Reads the cached piece sha (len bytes) into dst, checking it. 0, or LB_ENOTFOUND when it is
 * not cached (a damaged one is removed: it will be fetched again).
 */
static int
cget(struct lb_acache *c, const uint8_t sha[32], uint64_t len, uint8_t *dst)
{
	struct centry	*e;
	uint8_t		 got[32];
	char		 path[PATH_MAX], h[65];
	int		 fd, ok;

	pthread_mutex_lock(&c->mu);
	e = cfind(c, sha);
	if (e != NULL)
		e->used = ++c->clock;
	pthread_mutex_unlock(&c->mu);
	if (e == NULL)
		return (LB_ENOTFOUND);
	hex(sha, 32, h);
	if (lb_path(path, sizeof(path), "%s/%s", c->dir, h) != 0)
		return (LB_ENOTFOUND);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		ok = 0;
	else {
		ok = lb_pread_all(fd, dst, (size_t)len, 0) == 0 &&
		    lb_sha256(dst, (size_t)len, got) == 0 && memcmp(got, sha, 32) == 0;
		/* (its time is its last use: the order a restart starts from) */
		if (ok)
			(void)futimens(fd, NULL);
		close(fd);
	}
	if (!ok) {
		pthread_mutex_lock(&c->mu);
		if ((e = cfind(c, sha)) != NULL)
			cdel(c, e);
		pthread_mutex_unlock(&c->mu);
		return (LB_ENOTFOUND);
	}
	return (0);
}

/* Keeps a checked piece (best effort: a full disk only costs a fetch next time). */
static void
cstore(struct lb_acache *c, const uint8_t sha[32], const uint8_t *p, uint64_t len)
{
	char	path[PATH_MAX], tmp[PATH_MAX], h[65];
	int	fd, ok;

	if (len > c->budget)
		return;
	hex(sha, 32, h);
	if (lb_path(path, sizeof(path), "%s/%s", c->dir, h) != 0 ||
	    lb_path(tmp, sizeof(tmp), "%s/%s.%ld.%lu.tmp", c->dir, h, (long)getpid(),
	    (unsigned long)pthread_self()) != 0)
		return;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) == -1)
		return;
	ok = lb_write_all(fd, p, (size_t)len) == 0;
	close(fd);
	if (!ok || rename(tmp, path) == -1) {
		(void)unlink(tmp);
		return;
	}
	pthread_mutex_lock(&c->mu);
	if (cput(c, sha, len) == 0)
		cevict(c, sha);
	pthread_mutex_unlock(&c->mu);
}

/* ---------------------------------------------------------------- ranged GETs */

struct sink {
	uint8_t		*dst;
	uint64_t	 want, got;
	int		 over;
};

static size_t
sink_write(char *p, size_t sz, size_t n, void *arg)
{
	struct sink	*s = arg;
	size_t		 k = sz * n;

	if (k > s->want - s->got) {
		s->over = 1;
		return (0);
	}
	memcpy(s->dst + s->got, p, k);
	s->got += k;
	return (k);
}

static CURL *
curl_take(struct lb_acache *c)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->mu);
	if (c->ncurl > 0)
		h = c->curls[--c->ncurl];
	pthread_mutex_unlock(&c->mu);
	return (h != NULL ? h : curl_easy_init());
}

static void
curl_give(struct lb_acache *c, CURL *h)
{
	pthread_mutex_lock(&c->mu);
	if (c->ncurl < CURLS_MAX) {
		c->curls[c->ncurl++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	if (h != NULL)
		curl_easy_cleanup(h);
}

/* Appends s to b, %-encoding every byte but unreserved ones and '/'. */
static int
url_put(char *b, size_t cap, size_t *at, const char *s)
{
	static const char d[] = "0123456789ABCDEF";

	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if (*at + 4 > cap)
			return (ENAMETOOLONG);
		if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '/')
			b[(*at)++] = (char)ch;
		else {
			b[(*at)++] = '%';
			b[(*at)++] = d[ch >> 4];
			b[(*at)++] = d[ch & 15];
		}
	}
	b[*at] = '\0';
	return (0);
}

/* GETs bytes [off, off + len) of key into dst. LB_EARCHIVE with why set on any failure. */
static int
fetch(struct lb_archive *a, const char *key, uint64_t off, uint64_t len, uint8_t *dst,
    struct lb_astat *stat)
{
	struct sink	 s = { dst, len, 0, 0 };
	char		 url[PATH_MAX * 2], range[64], sigv4[128];
	size_t		 at;
	long		 code = 0;
	CURLcode	 cc;
	CURL		*h;
	int		 rc;

	at = strlen(a->endpoint);
	if (at + 2 > sizeof(url))
		return (ENAMETOOLONG);
	memcpy(url, a->endpoint, at);
	url[at++] = '/';
	url[at] = '\0';
	if ((rc = url_put(url, sizeof(url), &at, a->bucket)) != 0 ||
	    (rc = url_put(url, sizeof(url), &at, "/")) != 0 ||
	    (rc = url_put(url, sizeof(url), &at, key)) != 0)
		return (rc);
	snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off,
	    (unsigned long long)(off + len - 1));
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", a->region);
	if ((h = curl_take(a->cache)) == NULL)
		return (ENOMEM);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (a->ca_file[0] != '\0')
		curl_easy_setopt(h, CURLOPT_CAINFO, a->ca_file);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, sigv4);
	curl_easy_setopt(h, CURLOPT_USERNAME, a->access_key);
	curl_easy_setopt(h, CURLOPT_PASSWORD, a->secret_key);
	curl_easy_setopt(h, CURLOPT_RANGE, range);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, LOW_SPEED_SECS);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	cc = curl_easy_perform(h);
	if (cc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (cc == CURLE_OK && (code == 206 || (code == 200 && off == 0)) && s.got == len &&
	    !s.over) {
		curl_give(a->cache, h);
		stat->fetched += len;
		stat->gets++;
		return (0);
	}
	curl_easy_cleanup(h);
	if (stat->why[0] == '\0') {
		if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && s.over))
			snprintf(stat->why, sizeof(stat->why), "%.63s/%.200s: %s", a->bucket, key,
			    curl_easy_strerror(cc));
		else if (code != 206 && code != 200)
			snprintf(stat->why, sizeof(stat->why), "%.63s/%.200s: HTTP %ld", a->bucket, key,
			    code);
		else
			snprintf(stat->why, sizeof(stat->why),
			    "%.63s/%.200s: %llu bytes at %llu asked, other bytes answered", a->bucket, key,
			    (unsigned long long)len, (unsigned long long)off);
	}
	return (LB_EARCHIVE);
}

static uint64_t
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
}

static void
object_key(const struct lb_archive *a, uint32_t day, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s/%04u/%02u-%02u/%s", a->prefix, a->prefix[0] ? "/" : "",
	    a->ls, day / 10000, day / 100 % 100, day % 100, name);
}

/*
 * Bytes [off, off + len) of file f of day d into dst, whose SHA-256 must be sha: from the
 * cache, else fetched, checked and cached. LB_EARCHIVE (why set) when the store fails, and
 * also when it answers other bytes than the record says: a search then fails rather than
 * skip what was changed in the archive.
 */
static int
piece(struct lb_archive *a, const struct aday *d, const char *name, uint64_t off, uint64_t len,
    const uint8_t sha[32], uint8_t *dst, struct lb_astat *stat)
{
	char	key[PATH_MAX];
	uint8_t	got[32];
	int	rc;

	if ((rc = cget(a->cache, sha, len, dst)) == 0) {
		stat->cached += len;
		return (0);
	}
	object_key(a, d->day, name, key, sizeof(key));
	if ((rc = fetch(a, key, off, len, dst, stat)) != 0)
		return (rc);
	if ((rc = lb_sha256(dst, (size_t)len, got)) != 0)
		return (rc);
	if (memcmp(got, sha, 32) != 0) {
		snprintf(stat->why, sizeof(stat->why),
		    "%.63s/%.200s: %llu bytes at %llu are not the ones archived (SHA-256 differs): not trusted",
		    a->bucket, key, (unsigned long long)len, (unsigned long long)off);
		return (LB_EARCHIVE);
	}
	cstore(a->cache, sha, dst, len);
	return (0);
}

/* ---------------------------------------------------------------- the archived days */

void
lb_archive_record_free(struct aday *d)
{
	for (size_t i = 0; i < d->nfiles; i++)
		free(d->files[i].pieces);
	free(d->files);
	if (d->x_loaded)
		lb_dayx_free(&d->x);
	free(d->blocks);
	free(d->bsha);
}

static const struct afile *
afile_find(const struct aday *d, const char *name)
{
	for (size_t i = 0; i < d->nfiles; i++)
		if (strcmp(d->files[i].name, name) == 0)
			return (&d->files[i]);
	return (NULL);
}

static int
json_i64(json_t *v, int64_t *out)
{
	if (json_is_integer(v)) {
		*out = (int64_t)json_integer_value(v);
		return (0);
	}
	if (json_is_null(v)) {
		*out = INT64_MIN;
		return (0);
	}
	return (-1);
}

static int
json_sha(json_t *v, uint8_t out[32])
{
	return (json_is_string(v) && strlen(json_string_value(v)) == 64 &&
	    unhex(json_string_value(v), out, 32) == 0 ? 0 : -1);
}

/*
 * Parses one verified record (logbox-archive's <state>/<ls>/verified/YYYYMMDD.json) of day.
 * -1 when it is not one this reader can use (not JSON, a member missing or of another type, a
 * record written before days were searchable in place).
 */
int
lb_archive_record_parse(const char *buf, size_t len, uint32_t day, struct aday *d)
{
	json_error_t	 err;
	json_t		*r, *v, *files, *pieces, *dr;
	const char	*name;
	size_t		 n = 0;
	int		 rc = -1;

	memset(d, 0, sizeof(*d));
	d->day = day;
	if ((r = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err)) == NULL)
		return (-1);
	files = json_object_get(r, "files");
	pieces = json_object_get(r, "pieces");
	dr = json_object_get(r, "dayref");
	v = json_object_get(r, "catalog");
	if (!json_is_object(files) || !json_is_object(pieces) || !json_is_object(dr) ||
	    !json_is_array(v) || json_array_size(v) != 2 ||
	    lb_dayx_u64(json_array_get(v, 0), &d->catsize) != 0 || d->catsize > SIZE_MAX_FILE ||
	    json_sha(json_array_get(v, 1), d->catsha) != 0 ||
	    lb_dayx_u64(json_object_get(dr, "first_id"), &d->ref.first_id) != 0 ||
	    lb_dayx_u64(json_object_get(dr, "next_id"), &d->ref.next_id) != 0 ||
	    json_i64(json_object_get(dr, "tmin"), &d->ref.tmin) != 0 ||
	    json_i64(json_object_get(dr, "tmax"), &d->ref.tmax) != 0 ||
	    d->ref.first_id == 0 || d->ref.next_id < d->ref.first_id)
		goto done;
	d->ref.day = day;
	if ((d->files = calloc(json_object_size(files) + 1, sizeof(*d->files))) == NULL)
		goto done;
	json_object_foreach(files, name, v) {
		struct afile	*f = &d->files[n];
		json_t		*p = json_object_get(pieces, name), *ps;

		if (strlen(name) >= sizeof(f->name) || !json_is_array(v) ||
		    json_array_size(v) != 2 || lb_dayx_u64(json_array_get(v, 0), &f->size) != 0 ||
		    f->size > SIZE_MAX_FILE || json_sha(json_array_get(v, 1), f->sha) != 0)
			goto done;
		memcpy(f->name, name, strlen(name) + 1);
		n++;
		d->nfiles = n;
		if (p == NULL)
			continue;
		ps = json_object_get(p, "sha256");
		if (lb_dayx_u64(json_object_get(p, "size"), &f->piece) != 0 || f->piece == 0 ||
		    f->piece > PIECE_MAX || !json_is_array(ps) ||
		    json_array_size(ps) != f->size / f->piece + (f->size % f->piece != 0) ||
		    (f->pieces = calloc(json_array_size(ps) + 1, 32)) == NULL)
			goto done;
		for (size_t i = 0; i < json_array_size(ps); i++)
			if (json_sha(json_array_get(ps, i), f->pieces[i]) != 0)
				goto done;
		f->npieces = json_array_size(ps);
	}
	rc = 0;
 done:
	json_decref(r);
	if (rc != 0)
		lb_archive_record_free(d);
	return (rc);
}

static int
aday_read(const char *path, uint32_t day, struct aday *d)
{
	struct stat	 st;
	char		*buf;
	int		 fd, rc = -1;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return (-1);
	if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (64 << 20) &&
	    (buf = malloc((size_t)st.st_size)) != NULL) {
		if (lb_pread_all(fd, buf, (size_t)st.st_size, 0) == 0)
			rc = lb_archive_record_parse(buf, (size_t)st.st_size, day, d);
		free(buf);
	}
	close(fd);
	return (rc);
}

static int
cmp_aday(const void *a, const void *b)
{
	const struct aday *x = a, *y = b;

	return (x->ref.first_id < y->ref.first_id ? -1 : x->ref.first_id > y->ref.first_id);
}

static int
settings_read(struct lb_archive *a, const char *path, char *why, size_t whylen)
{
	json_error_t	 err;
	json_t		*r, *t;
	struct {
		const char	*k;
		char		*dst;
		size_t		 len;
		int		 need;
	} f[] = {
		{ "endpoint", a->endpoint, sizeof(a->endpoint), 1 },
		{ "bucket", a->bucket, sizeof(a->bucket), 1 },
		{ "prefix", a->prefix, sizeof(a->prefix), 0 },
		{ "region", a->region, sizeof(a->region), 0 },
		{ "access_key", a->access_key, sizeof(a->access_key), 1 },
		{ "secret_key", a->secret_key, sizeof(a->secret_key), 1 },
		{ "ca_file", a->ca_file, sizeof(a->ca_file), 0 },
	};
	int		 rc = LB_EBADCONF;

	if ((r = json_load_file(path, 0, &err)) == NULL) {
		/* (not err.text: it may quote the secret it stopped in) */
		snprintf(why, whylen, "%s: not readable JSON (line %d, column %d)", path, err.line,
		    err.column);
		return (errno == ENOENT ? LB_ENOTFOUND : LB_EBADCONF);
	}
	t = json_object_get(json_object_get(r, "targets"), a->ls);
	if (t == NULL) {
		snprintf(why, whylen, "%s: no archive target for logspace %s", path, a->ls);
		rc = LB_ENOTFOUND;
		goto done;
	}
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		json_t *v = json_object_get(t, f[i].k);

		if (json_is_null(v) || v == NULL) {
			if (f[i].need) {
				snprintf(why, whylen, "%s: target %s has no %s", path, a->ls, f[i].k);
				goto done;
			}
			continue;
		}
		if (!json_is_string(v) || strlen(json_string_value(v)) >= f[i].len) {
			snprintf(why, whylen, "%s: target %s: bad %s", path, a->ls, f[i].k);
			goto done;
		}
		memcpy(f[i].dst, json_string_value(v), strlen(json_string_value(v)) + 1);
	}
	if (strncmp(a->endpoint, "https://", 8) != 0) {
		snprintf(why, whylen, "%s: target %s: the endpoint is not https://", path, a->ls);
		goto done;
	}
	while (strlen(a->endpoint) > 8 && a->endpoint[strlen(a->endpoint) - 1] == '/')
		a->endpoint[strlen(a->endpoint) - 1] = '\0';
	if (a->region[0] == '\0')
		memcpy(a->region, "us-east-1", sizeof("us-east-1"));
	rc = 0;
 done:
	json_decref(r);
	return (rc);
}

static int
mtime_of(const char *path, struct timespec *ts)
{
	struct stat st;

	if (stat(path, &st) == -1)
		return (errno);
	*ts = st.st_mtim;
	return (0);
}

int
lb_archive_open(struct lb_acache *cache, const char *settings, const char *state,
    const char *ls, struct lb_archive **out, char *why, size_t whylen)
{
	struct lb_archive	*a;
	struct dirent		*de;
	DIR			*dd;
	char			 path[PATH_MAX];
	int			 rc;

	why[0] = '\0';
	if ((a = calloc(1, sizeof(*a))) == NULL)
		return (ENOMEM);
	atomic_init(&a->refs, 1);
	a->cache = cache;
	snprintf(a->ls, sizeof(a->ls), "%s", ls);
	if ((rc = lb_path(a->settings, sizeof(a->settings), "%s", settings)) != 0 ||
	    (rc = lb_path(a->vdir, sizeof(a->vdir), "%s/%s/verified", state, ls)) != 0)
		goto fail;
	(void)mtime_of(a->settings, &a->smtime);
	(void)mtime_of(a->vdir, &a->vmtime);
	if ((rc = settings_read(a, settings, why, whylen)) != 0)
		goto fail;
	if ((dd = opendir(a->vdir)) == NULL) {
		rc = errno == ENOENT ? LB_ENOTFOUND : errno;
		snprintf(why, whylen, "%s: %s", a->vdir, strerror(errno));
		goto fail;
	}
	while ((de = readdir(dd)) != NULL) {
		char		*end;
		unsigned long	 day;
		struct aday	 d, *nd;

		if (strlen(de->d_name) != 13 || strcmp(de->d_name + 8, ".json") != 0)
			continue;
		day = strtoul(de->d_name, &end, 10);
		if (end != de->d_name + 8 || day < 19700101 || day > 99991231)
			continue;
		if (lb_path(path, sizeof(path), "%s/%s", a->vdir, de->d_name) != 0)
			continue;
		if (aday_read(path, (uint32_t)day, &d) != 0) {
			a->unusable++;
			continue;
		}
		if ((nd = realloc(a->days, (a->ndays + 1) * sizeof(*nd))) == NULL) {
			lb_archive_record_free(&d);
			closedir(dd);
			rc = ENOMEM;
			goto fail;
		}
		a->days = nd;
		a->days[a->ndays++] = d;
	}
	closedir(dd);
	if (a->ndays > 0)
		qsort(a->days, a->ndays, sizeof(*a->days), cmp_aday);
	/* (each day's loads under its own lock: one slow day holds up no other) */
	for (size_t i = 0; i < a->ndays; i++) {
		pthread_mutex_init(&a->days[i].mu, NULL);
		a->days[i].mu_init = 1;
	}
	for (size_t i = 1; i < a->ndays; i++) {
		if (a->days[i].ref.first_id < a->days[i - 1].ref.next_id) {
			snprintf(why, whylen, "%s: days %u and %u overlap", a->vdir,
			    a->days[i - 1].day, a->days[i].day);
			rc = LB_ECORRUPT;
			goto fail;
		}
	}
	*out = a;
	return (0);
 fail:
	lb_archive_unref(a);
	return (rc);
}

struct lb_archive *
lb_archive_ref(struct lb_archive *a)
{
	if (a != NULL)
		atomic_fetch_add(&a->refs, 1);
	return (a);
}

void
lb_archive_unref(struct lb_archive *a)
{
	if (a == NULL || atomic_fetch_sub(&a->refs, 1) != 1)
		return;
	for (size_t i = 0; i < a->ndays; i++) {
		if (a->days[i].mu_init)
			pthread_mutex_destroy(&a->days[i].mu);
		lb_archive_record_free(&a->days[i]);
	}
	free(a->days);
	explicit_bzero(a->secret_key, sizeof(a->secret_key));
	free(a);
}

int
lb_archive_stale(struct lb_archive *a)
{
	struct timespec s = { 0, 0 }, v = { 0, 0 };

	(void)mtime_of(a->settings, &s);
	(void)mtime_of(a->vdir, &v);
	return (s.tv_sec != a->smtime.tv_sec || s.tv_nsec != a->smtime.tv_nsec ||
	    v.tv_sec != a->vmtime.tv_sec || v.tv_nsec != a->vmtime.tv_nsec);
}

size_t
lb_archive_ndays(const struct lb_archive *a, size_t *unusable)
{
	if (unusable != NULL)
		*unusable = a->unusable;
	return (a->ndays);
}

const struct lb_dayref *
lb_archive_day(const struct lb_archive *a, size_t i)
{
	return (&a->days[i].ref);
}

static struct aday *
aday_find(struct lb_archive *a, uint32_t day)
{
	for (size_t i = 0; i < a->ndays; i++)
		if (a->days[i].day == day)
			return (&a->days[i]);
	return (NULL);
}

/* The day's catalog extract, fetched and parsed once. Under d->mu. */
static int
aday_catalog(struct lb_archive *a, struct aday *d, struct lb_astat *stat)
{
	uint8_t	*buf;
	char	 why[200];
	int	 rc;

	if (d->x_loaded)
		return (0);
	if (d->catsize == 0 || d->catsize > (64u << 20))
		return (LB_EARCHIVE);
	if ((buf = malloc((size_t)d->catsize)) == NULL)
		return (ENOMEM);
	if ((rc = piece(a, d, "catalog.json", 0, d->catsize, d->catsha, buf, stat)) == 0) {
		rc = lb_dayx_parse((const char *)buf, (size_t)d->catsize, &d->x, why, sizeof(why));
		if (rc != 0) {
			snprintf(stat->why, sizeof(stat->why), "%s %u catalog.json: %s", a->ls,
			    d->day, why);
			rc = LB_EARCHIVE;
		}
		else if (strcmp(d->x.ls, a->ls) != 0 || d->x.day.day != d->day ||
		    d->x.day.first_id != d->ref.first_id || d->x.day.next_id != d->ref.next_id) {
			lb_dayx_free(&d->x);
			snprintf(stat->why, sizeof(stat->why),
			    "%s %u catalog.json: not the day its verified record says", a->ls, d->day);
			rc = LB_EARCHIVE;
		} else
			d->x_loaded = 1;
	}
	free(buf);
	return (rc);
}

int
lb_archive_day_segments(struct lb_archive *a, uint32_t day, uint64_t lo, uint64_t hi,
    struct lb_segref **refs, size_t *n, struct lb_astat *stat)
{
	struct aday	*d;
	int		 rc;

	if ((d = aday_find(a, day)) == NULL)
		return (LB_ENOTFOUND);
	pthread_mutex_lock(&d->mu);
	if ((rc = aday_catalog(a, d, stat)) != 0)
		goto done;
	for (size_t k = 0; k < d->x.nseg; k++) {
		struct lb_segref *s = &d->x.segs[k], *nr;

		if (s->last_id < lo || s->first_id > hi)
			continue;
		if ((nr = realloc(*refs, (*n + 1) * sizeof(*nr))) == NULL) {
			rc = ENOMEM;
			break;
		}
		*refs = nr;
		nr[*n] = *s;
		nr[*n].day = d->day;
		(*n)++;
	}
 done:
	pthread_mutex_unlock(&d->mu);
	return (rc);
}

int
lb_archive_day_time_to_id(struct lb_archive *a, uint32_t day, int64_t t, uint64_t *id,
    struct lb_astat *stat)
{
	struct aday	*d;
	int64_t		 step = t / LB_TIMEMAP_STEP;
	int		 rc;

	if ((d = aday_find(a, day)) == NULL)
		return (LB_ENOTFOUND);
	if (t % LB_TIMEMAP_STEP < 0)
		step--;
	step *= LB_TIMEMAP_STEP;
	pthread_mutex_lock(&d->mu);
	if ((rc = aday_catalog(a, d, stat)) == 0) {
		rc = LB_ENOTFOUND;
		for (size_t k = 0; k < d->x.nt; k++) {
			if (d->x.t[k] >= step) {
				*id = d->x.ids[k];
				rc = 0;
				break;
			}
		}
	}
	pthread_mutex_unlock(&d->mu);
	return (rc);
}

/* ---------------------------------------------------------------- remote readers */

/* What a remote segment or message file reads through: its archive (referenced), day, file. */
struct rsrc {
	struct lb_archive	*a;
	struct aday		*d;
	const struct afile	*f;	/* a segment's (its pieces); NULL for the messages */
	struct lb_astat		*stat;
};

static struct rsrc *
rsrc_new(struct lb_archive *a, struct aday *d, const struct afile *f, struct lb_astat *stat)
{
	struct rsrc *r;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return (NULL);
	r->a = lb_archive_ref(a);
	r->d = d;
	r->f = f;
	r->stat = stat;
	return (r);
}

static void
rsrc_done(void *arg)
{
	struct rsrc *r = arg;

	lb_archive_unref(r->a);
	free(r);
}

static int
rseg_fill(void *arg, uint64_t off, uint64_t len, uint8_t *dst)
{
	struct rsrc		*r = arg;
	const struct afile	*f = r->f;
	uint64_t		 t0 = now_us(), p = off / f->piece, end = off + len;
	uint64_t		 i, j;
	int			 rc = 0;

	/* Cached pieces first; each run of missing ones is one GET, then checked piece by piece. */
	for (i = p; i * f->piece < end && rc == 0; i = j) {
		uint64_t o = i * f->piece, l = o + f->piece > f->size ? f->size - o : f->piece;

		if (cget(r->a->cache, f->pieces[i], l, dst + (o - off)) == 0) {
			r->stat->cached += l;
			j = i + 1;
			continue;
		}
		/* (a run of at most FETCH_RUN_MAX: what came is kept before the next GET) */
		for (j = i + 1; j * f->piece < end && (j - i) * f->piece < FETCH_RUN_MAX; j++) {
			uint64_t o2 = j * f->piece, l2 = o2 + f->piece > f->size ? f->size - o2 :
			    f->piece;
			struct centry *e;

			pthread_mutex_lock(&r->a->cache->mu);
			e = cfind(r->a->cache, f->pieces[j]);
			pthread_mutex_unlock(&r->a->cache->mu);
			if (e != NULL || l2 == 0)
				break;
		}
		uint64_t rend = j * f->piece > f->size ? f->size : j * f->piece;
		char key[PATH_MAX];

		object_key(r->a, r->d->day, f->name, key, sizeof(key));
		if ((rc = fetch(r->a, key, o, rend - o, dst + (o - off), r->stat)) != 0)
			break;
		for (uint64_t k = i; k < j; k++) {
			uint64_t ok = k * f->piece, lk = ok + f->piece > f->size ? f->size - ok :
			    f->piece;
			uint8_t got[32];

			if ((rc = lb_sha256(dst + (ok - off), (size_t)lk, got)) != 0)
				break;
			if (memcmp(got, f->pieces[k], 32) != 0) {
				snprintf(r->stat->why, sizeof(r->stat->why),
				    "%.63s/%.200s: piece %llu is not the one archived (SHA-256 differs): "
				    "not trusted", r->a->bucket, key, (unsigned long long)k);
				rc = LB_EARCHIVE;
				break;
			}
			cstore(r->a->cache, f->pieces[k], dst + (ok - off), lk);
		}
	}
	r->stat->us += now_us() - t0;
	return (rc);
}

int
lb_archive_segment(struct lb_archive *a, const struct lb_segref *ref, struct lb_astat *stat,
    struct lb_segment **out)
{
	struct lb_segsrc	 src;
	struct rsrc		*r;
	struct aday		*d;
	const struct afile	*f;
	char			 name[80];
	int			 rc;

	if ((d = aday_find(a, ref->day)) == NULL)
		return (LB_ENOTFOUND);
	snprintf(name, sizeof(name), "index/%s", ref->file);
	if ((f = afile_find(d, name)) == NULL || f->pieces == NULL) {
		snprintf(stat->why, sizeof(stat->why), "%s %u: %s has no piece list in its verified "
		    "record", a->ls, d->day, name);
		return (LB_EARCHIVE);
	}
	if ((r = rsrc_new(a, d, f, stat)) == NULL)
		return (ENOMEM);
	src.arg = r;
	src.size = f->size;
	src.piece = (uint32_t)f->piece;
	src.fill = rseg_fill;
	src.done = rsrc_done;
	if ((rc = lb_segment_open_src(&src, out)) != 0)
		rsrc_done(r);
	return (rc);
}

static int
rmsg_block(void *arg, uint64_t off, uint32_t len, const uint8_t sha[32], uint8_t *dst)
{
	struct rsrc	*r = arg;
	uint64_t	 t0 = now_us();
	int		 rc;

	rc = piece(r->a, r->d, "messages", off, len, sha, dst, r->stat);
	r->stat->us += now_us() - t0;
	return (rc);
}

/* The day's block index from its chain, fetched and checked once. Under d->mu. */
static int
aday_chain(struct lb_archive *a, struct aday *d, struct lb_astat *stat)
{
	const struct afile	*f;
	struct lb_chrec		*recs = NULL;
	uint8_t			*buf;
	size_t			 n = 0;
	char			 why[200];
	int			 rc;

	if (d->blocks != NULL)
		return (0);
	if ((f = afile_find(d, "chain")) == NULL) {
		snprintf(stat->why, sizeof(stat->why), "%s %u: archived without a chain: its "
		    "messages cannot be read in place (logbox archive restore)", a->ls, d->day);
		return (LB_EARCHIVE);
	}
	if (f->size > (256u << 20))
		return (LB_ETOOBIG);
	if ((buf = malloc(f->size > 0 ? (size_t)f->size : 1)) == NULL)
		return (ENOMEM);
	if ((rc = piece(a, d, "chain", 0, f->size, f->sha, buf, stat)) != 0)
		goto done;
	if ((rc = lb_chain_parse(buf, (size_t)f->size, &recs, &n, why, sizeof(why))) != 0) {
		snprintf(stat->why, sizeof(stat->why), "%s %u chain: %s", a->ls, d->day, why);
		rc = LB_EARCHIVE;
		goto done;
	}
	if ((d->blocks = calloc(n + 1, sizeof(*d->blocks))) == NULL ||
	    (d->bsha = calloc(n + 1, sizeof(*d->bsha))) == NULL) {
		rc = ENOMEM;
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		if (recs[i].kind != LB_CH_BLOCK)
			continue;
		d->blocks[d->nblocks].off = recs[i].off;
		d->blocks[d->nblocks].first = recs[i].first_id;
		d->blocks[d->nblocks].count = (uint32_t)recs[i].count;
		d->blocks[d->nblocks].len = (uint32_t)recs[i].len;
		memcpy(d->bsha[d->nblocks], recs[i].sha, 32);
		d->nblocks++;
	}
	rc = 0;
 done:
	if (rc != 0) {
		free(d->blocks);
		free(d->bsha);
		d->blocks = NULL;
		d->bsha = NULL;
		d->nblocks = 0;
	}
	lb_chain_free(recs, n);
	free(buf);
	return (rc);
}

int
lb_archive_msgfile(struct lb_archive *a, uint32_t day, struct lb_astat *stat,
    struct lb_msgfile **out)
{
	struct lb_msgsrc	 src;
	struct rsrc		*r;
	struct aday		*d;
	uint64_t		 t0 = now_us();
	int			 rc;

	if ((d = aday_find(a, day)) == NULL)
		return (LB_ENOTFOUND);
	pthread_mutex_lock(&d->mu);
	rc = aday_chain(a, d, stat);
	pthread_mutex_unlock(&d->mu);
	stat->us += now_us() - t0;
	if (rc != 0)
		return (rc);
	if ((r = rsrc_new(a, d, NULL, stat)) == NULL)
		return (ENOMEM);
	src.arg = r;
	src.block = rmsg_block;
	src.done = rsrc_done;
	if ((rc = lb_msgfile_open_src(&src, d->ref.first_id, d->blocks,
	    (const uint8_t (*)[32])d->bsha, d->nblocks, out)) != 0) {
		rsrc_done(r);
		if (rc == LB_ECORRUPT) {
			snprintf(stat->why, sizeof(stat->why), "%s %u: the chain's blocks do not "
			    "cover the day's ids", a->ls, day);
			rc = LB_EARCHIVE;
		}
		return (rc);
	}
	/* (a day's ids must all be in its blocks) */
	if (d->nblocks == 0 ? d->ref.next_id != d->ref.first_id :
	    d->blocks[d->nblocks - 1].first + d->blocks[d->nblocks - 1].count != d->ref.next_id) {
		lb_msgfile_close(*out);
		*out = NULL;
		snprintf(stat->why, sizeof(stat->why), "%s %u: the chain's blocks do not cover the "
		    "day's ids", a->ls, day);
		return (LB_EARCHIVE);
	}
	return (0);
}

/* ---------------------------------------------------------------- what a search read */

int
lb_astat_day(struct lb_astat *s, uint32_t day)
{
	uint32_t *nd;

	for (size_t i = s->ndays; i > 0; i--)
		if (s->days[i - 1] == day)
			return (0);
	if (s->ndays == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 16;

		if ((nd = realloc(s->days, nc * sizeof(*nd))) == NULL)
			return (ENOMEM);
		s->days = nd;
		s->cap = nc;
	}
	s->days[s->ndays++] = day;
	return (0);
}
