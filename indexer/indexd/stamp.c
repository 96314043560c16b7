/*
 * stamp.c — day roots off the box (FORMAT.md §14.7): RFC 3161 time stamps from --tsa-url, and
 * a syslog line to --root-syslog HOST:PORT (removing the newest days then shows elsewhere).
 * A thread of its own (a TSA may be slow or away: the appends never wait for it) looks, when
 * kicked after a seal run and at least every STAMP_EVERY_S, at each logspace's days but the
 * newest: a day whose chain has a day root and that has no root.tsr gets one; with no
 * root.sent, its line goes out (then root.sent keeps it). The request goes over HTTP(S)
 * (libcurl, STAMP_TIMEOUT_S); the reply is kept only when it is a granted time stamp of that
 * root. A failure is logged once until one succeeds again, and tried again later.
 */
#include <sys/socket.h>
#include <sys/time.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "indexd.h"
#include "lb_chain.h"
#include "lb_format.h"
#include "lb_util.h"

#define STAMP_EVERY_S	60	/* looked at least this often */
#define STAMP_TIMEOUT_S	20	/* a request's time limit */
#define STAMP_DAYS	7	/* the newest days looked at (older ones: done or gone) */
#define ROOT_PRI	85	/* the day root line: authpriv.notice */

struct buf {
	uint8_t	*p;
	size_t	 n;
	int	 big;
};

static size_t
take(char *p, size_t size, size_t n, void *arg)
{
	struct buf	*b = arg;
	size_t		 k = size * n;
	uint8_t		*q;

	if (b->n + k > LB_TSR_MAX) {
		b->big = 1;
		return (0);
	}
	if ((q = realloc(b->p, b->n + k)) == NULL)
		return (0);
	b->p = q;
	memcpy(b->p + b->n, p, k);
	b->n += k;
	return (k);
}

/* POSTs the request der to url; the reply body in *out. 0, or why in err. */
static int
post(const char *url, const uint8_t *der, size_t len, struct buf *out, char *err, size_t elen)
{
	CURL			*c;
	struct curl_slist	*h = NULL;
	long			 code = 0;
	CURLcode		 cc;

	if ((c = curl_easy_init()) == NULL) {
		snprintf(err, elen, "libcurl: cannot start a request");
		return (ENOMEM);
	}
	h = curl_slist_append(h, "Content-Type: application/timestamp-query");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, der);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, take);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)STAMP_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (out->big) {
		snprintf(err, elen, "%s: a reply over %d bytes", url, LB_TSR_MAX);
		return (EFBIG);
	}
	if (cc != CURLE_OK) {
		snprintf(err, elen, "%s: %s", url, curl_easy_strerror(cc));
		return (EIO);
	}
	if (code != 200) {
		snprintf(err, elen, "%s: HTTP %ld", url, code);
		return (EIO);
	}
	return (0);
}

/* The day root of daydir's chain (the last one). ENOENT when it has none. */
static int
root_of(const char *daydir, struct lb_chrec *root)
{
	struct lb_chrec	*recs = NULL;
	size_t		 n = 0;
	int		 rc, found = 0;

	rc = lb_chain_load(daydir, &recs, &n, NULL, 0);
	for (size_t i = 0; i < n; i++)
		if (recs[i].kind == LB_CH_DAYROOT) {
			*root = recs[i];
			root->repl = NULL;
			found = 1;
		}
	lb_chain_free(recs, n);
	if (rc != 0 && rc != LB_ECORRUPT)
		return (rc);
	return (found ? 0 : ENOENT);
}

static void
hex(char *out, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/*
 * Sends the day root of ls's day as one RFC 5424 line over TCP to --root-syslog HOST:PORT,
 * then writes it to <day>/root.sent. 0, or why in err.
 */
static int
send_root(struct indexd *env, const char *ls, uint32_t day, const char *dir,
    const struct lb_chrec *r, char *err, size_t elen)
{
	struct addrinfo	 hints, *ai = NULL;
	struct timeval	 tv = { STAMP_TIMEOUT_S, 0 };
	char		 line[1024], host[256], port[16], now[40], hh[2 * LB_SHA256_LEN + 1];
	char		 sh[2 * 64 + 1], path[PATH_MAX], me[128];
	const char	*colon;
	int		 fd = -1, rc, n;

	colon = strrchr(env->stamp.syslog, ':');
	snprintf(host, sizeof(host), "%.*s", (int)(colon - env->stamp.syslog), env->stamp.syslog);
	snprintf(port, sizeof(port), "%s", colon + 1);
	if (gethostname(me, sizeof(me)) != 0)
		snprintf(me, sizeof(me), "-");
	me[sizeof(me) - 1] = '\0';
	lb_time_fmt(now, sizeof(now), now_real_us(), 0);
	hex(hh, r->hash, LB_SHA256_LEN);
	hex(sh, r->sig, sizeof(r->sig));
	n = snprintf(line, sizeof(line), "<%d>1 %s %s logbox-indexd - dayroot [dayroot@32473 "
	    "logspace=\"%s\" day=\"%04u-%02u-%02u\" seq=\"%llu\" first_id=\"%llu\" "
	    "count=\"%llu\" root=\"%s\" sig=\"%s\"] day root of %s %04u-%02u-%02u\n",
	    ROOT_PRI, now, me, ls, day / 10000, day / 100 % 100, day % 100,
	    (unsigned long long)r->seq, (unsigned long long)r->first_id,
	    (unsigned long long)r->count, hh, sh, ls, day / 10000, day / 100 % 100, day % 100);
	if (n < 0 || (size_t)n >= sizeof(line)) {
		snprintf(err, elen, "the day root's line is too long");
		return (EOVERFLOW);
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0) {
		snprintf(err, elen, "%s: %s", env->stamp.syslog, gai_strerror(rc));
		return (EHOSTUNREACH);
	}
	rc = 0;
	if ((fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0)) == -1 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == -1 ||
	    connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 ||
	    lb_write_all(fd, line, (size_t)n) != 0)
		rc = errno != 0 ? errno : EIO;
	if (fd != -1)
		close(fd);
	freeaddrinfo(ai);
	if (rc != 0) {
		snprintf(err, elen, "%s: %s", env->stamp.syslog, strerror(rc));
		return (rc);
	}
	if (lb_path(path, sizeof(path), "%s/%s", dir, LB_FILE_ROOT_SENT) == 0 &&
	    (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640)) != -1) {
		(void)lb_write_all(fd, line, (size_t)n);
		(void)fsync(fd);
		close(fd);
	}
	log_info("stamp: %s %04u-%02u-%02u: day root sent to %s", ls, day / 10000,
	    day / 100 % 100, day % 100, env->stamp.syslog);
	return (0);
}

/* Stamps day of ls; 0 when done (or nothing to do). */
static int
stamp_day(struct indexd *env, const char *ls, uint32_t day, char *err, size_t elen)
{
	struct buf	 b = { NULL, 0, 0 };
	struct stat	 sb;
	struct lb_chrec	 root;
	uint8_t		 hash[LB_SHA256_LEN], *der = NULL;
	size_t		 len;
	char		 dir[PATH_MAX], tsr[PATH_MAX], sent[PATH_MAX], why[256];
	int		 rc;

	if (lb_day_dir(dir, sizeof(dir), env->data, ls, day) != 0 ||
	    lb_tsa_path(tsr, sizeof(tsr), dir) != 0 ||
	    lb_path(sent, sizeof(sent), "%s/%s", dir, LB_FILE_ROOT_SENT) != 0)
		return (0);
	if ((env->stamp.url == NULL || stat(tsr, &sb) == 0) &&
	    (env->stamp.syslog == NULL || stat(sent, &sb) == 0))
		return (0);	/* done */
	if (root_of(dir, &root) != 0)
		return (0);	/* not ended (signed) yet */
	memcpy(hash, root.hash, LB_SHA256_LEN);
	if (env->stamp.syslog != NULL && stat(sent, &sb) == -1 &&
	    (rc = send_root(env, ls, day, dir, &root, err, elen)) != 0)
		return (rc);
	if (env->stamp.url == NULL || stat(tsr, &sb) == 0)
		return (0);
	if ((rc = lb_tsa_request(hash, &der, &len)) != 0) {
		snprintf(err, elen, "the request: %s", lb_strerror(rc));
		return (rc);
	}
	rc = post(env->stamp.url, der, len, &b, err, elen);
	free(der);
	if (rc == 0 && (rc = lb_tsa_check(b.p, b.n, hash, NULL, NULL, why, sizeof(why))) != 0)
		snprintf(err, elen, "%s: %s", env->stamp.url, why);
	if (rc == 0 && (rc = lb_tsa_save(dir, b.p, b.n)) != 0)
		snprintf(err, elen, "%s %04u-%02u-%02u: writing %s: %s", ls, day / 10000,
		    day / 100 % 100, day % 100, LB_FILE_TSR, strerror(rc));
	if (rc == 0)
		log_info("stamp: %s %04u-%02u-%02u: time-stamped by %s", ls, day / 10000,
		    day / 100 % 100, day % 100, env->stamp.url);
	free(b.p);
	return (rc);
}

/* One pass over every logspace: the first failure stops it (the TSA is likely away). */
static void
stamp_pass(struct indexd *env)
{
	char			(*names)[LB_NAME_MAX + 1] = NULL;
	size_t			 nnames = 0;
	struct lb_dayref	*days;
	size_t			 n;
	char			 err[512] = "";
	int			 rc = 0;

	if (lb_catalog_logspace_names(env->cat, &names, &nnames) != 0)
		return;
	for (size_t i = 0; i < nnames && rc == 0; i++) {
		days = NULL;
		n = 0;
		if (lb_catalog_days(env->cat, names[i], &days, &n) != 0)
			continue;
		for (size_t k = n > STAMP_DAYS ? n - STAMP_DAYS : 0; k + 1 < n && rc == 0; k++)
			rc = stamp_day(env, names[i], days[k].day, err, sizeof(err));
		free(days);
	}
	free(names);
	pthread_mutex_lock(&env->stamp.mu);
	if (rc != 0 && env->stamp.error[0] == '\0')
		log_warnx("stamp: %s (tried again later)", err);
	else if (rc == 0 && env->stamp.error[0] != '\0')
		log_info("stamp: time stamps work again");
	snprintf(env->stamp.error, sizeof(env->stamp.error), "%s", rc != 0 ? err : "");
	pthread_mutex_unlock(&env->stamp.mu);
}

static void *
stamp_main(void *arg)
{
	struct indexd	*env = arg;
	struct timespec	 until;

	pthread_mutex_lock(&env->stamp.mu);
	while (!env->stamp.stop) {
		env->stamp.kick = 0;
		pthread_mutex_unlock(&env->stamp.mu);
		stamp_pass(env);
		pthread_mutex_lock(&env->stamp.mu);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += STAMP_EVERY_S;
		while (!env->stamp.stop && !env->stamp.kick)
			if (pthread_cond_timedwait(&env->stamp.cv, &env->stamp.mu, &until) ==
			    ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&env->stamp.mu);
	return (NULL);
}

void
stamp_start(struct indexd *env)
{
	if (env->stamp.url == NULL && env->stamp.syslog == NULL)
		return;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
		fatalx("%s: curl_global_init failed", __func__);
	pthread_mutex_init(&env->stamp.mu, NULL);
	pthread_cond_init(&env->stamp.cv, NULL);
	if (pthread_create(&env->stamp.thr, NULL, stamp_main, env) != 0)
		fatalx("%s: cannot start the time-stamp thread", __func__);
	env->stamp.on = 1;
	if (env->stamp.url != NULL)
		log_info("stamp: day roots are time-stamped by %s", env->stamp.url);
	if (env->stamp.syslog != NULL)
		log_info("stamp: day roots are sent to %s", env->stamp.syslog);
}

void
stamp_kick(struct indexd *env)
{
	if (!env->stamp.on)
		return;
	pthread_mutex_lock(&env->stamp.mu);
	env->stamp.kick = 1;
	pthread_cond_signal(&env->stamp.cv);
	pthread_mutex_unlock(&env->stamp.mu);
}

void
stamp_stop(struct indexd *env)
{
	if (!env->stamp.on)
		return;
	pthread_mutex_lock(&env->stamp.mu);
	env->stamp.stop = 1;
	pthread_cond_signal(&env->stamp.cv);
	pthread_mutex_unlock(&env->stamp.mu);
	pthread_join(env->stamp.thr, NULL);
	env->stamp.on = 0;
	curl_global_cleanup();
}
