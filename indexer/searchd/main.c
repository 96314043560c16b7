/*
 * main.c — logbox-searchd's process: options, the unix socket, privileges, signals, systemd
 * notification, and the order things start and stop in. It owns struct searchd's lifetime; the
 * request path lives in http.c (loop), pool.c (workers), handlers.c and query.c (the work).
 *
 * Start: check options and refuse root unless told otherwise, bind the socket (a stale socket
 * file is removed, a live searchd on it is an error), drop to --user, open the catalog
 * read-only (a data directory without a catalog yet is served with 503s until indexd creates
 * it), start the workers and the loop, then tell systemd READY=1. Errors up to there are fatal.
 * Stop (SIGTERM, SIGINT): close the listener and remove the socket, send every answer still
 * owed, exit 0. SIGHUP: every worker closes its store handles before its next job.
 */
#include <sys/stat.h>

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <systemd/sd-daemon.h>

#include "opt.h"
#include "searchd.h"

static const char *usage_text =
    "usage: logbox-searchd --data DIR --socket PATH [--threads N] [--deadline-ms MS]\n"
    "                      [--max-per-caller N] [--max-queued-per-caller N]\n"
    "                      [--max-terms N] [--cache-segments N] [--term-cache-mb N]\n"
    "                      [--archive-settings FILE --archive-state DIR\n"
    "                       --archive-cache DIR [--archive-cache-mb N]]\n"
    "                      [--user USER]\n"
    "                      [--allow-root] [-v]\n";

static void
parse_options(struct searchd *env, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "data",		required_argument,	NULL, 'd' },
		{ "socket",		required_argument,	NULL, 's' },
		{ "threads",		required_argument,	NULL, 't' },
		{ "deadline-ms",	required_argument,	NULL, 'D' },
		{ "max-per-caller",	required_argument,	NULL, 'P' },
		{ "max-queued-per-caller", required_argument,	NULL, 'Q' },
		{ "max-terms",		required_argument,	NULL, 'm' },
		{ "cache-segments",	required_argument,	NULL, 'c' },
		{ "term-cache-mb",	required_argument,	NULL, 'T' },
		{ "user",		required_argument,	NULL, 'u' },
		{ "archive-settings",	required_argument,	NULL, 'A' },
		{ "archive-state",	required_argument,	NULL, 'E' },
		{ "archive-cache",	required_argument,	NULL, 'K' },
		{ "archive-cache-mb",	required_argument,	NULL, 'M' },
		{ "allow-root",		no_argument,		NULL, 'R' },
		{ "verbose",		no_argument,		NULL, 'v' },
		{ "version",		no_argument,		NULL, 'V' },
		{ "help",		no_argument,		NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	long	ncpu;
	int	ch, term_cache_set = 0;

	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	env->sd_threads = ncpu < 1 ? 1 : ncpu > SD_THREADS_MAX ? SD_THREADS_MAX : (int)ncpu;
	env->sd_deadline_ms = 10000;
	env->sd_term_cache_mb = 0;	/* (set below: the library's budget per worker) */
	while ((ch = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd': env->sd_data = optarg; break;
		case 's': env->sd_sock = optarg; break;
		case 't': env->sd_threads = (int)opt_num("threads", optarg, 1, SD_THREADS_MAX);
			break;
		case 'D': env->sd_deadline_ms = (int64_t)opt_num("deadline-ms", optarg, 0,
			    86400000);
			break;
		case 'P': env->sd_max_per_caller = (int)opt_num("max-per-caller", optarg, 1,
			    SD_THREADS_MAX);
			break;
		case 'Q': env->sd_max_queued_per_caller = (int)opt_num("max-queued-per-caller",
			    optarg, 1, SD_QUEUE_MAX);
			break;
		case 'm': env->sd_max_terms = opt_num("max-terms", optarg, 1, UINT32_MAX); break;
		case 'c': env->sd_cache_segments = opt_num("cache-segments", optarg, 1,
			    1000000);
			break;
		case 'T': env->sd_term_cache_mb = opt_num("term-cache-mb", optarg, 0, 1048576);
			term_cache_set = 1;
			break;
		case 'u': env->sd_user = optarg; break;
		case 'A': env->sd_ar_settings = optarg; break;
		case 'E': env->sd_ar_state = optarg; break;
		case 'K': env->sd_ar_cache = optarg; break;
		case 'M': env->sd_ar_cache_mb = opt_num("archive-cache-mb", optarg, 1, 1 << 30);
			break;
		case 'R': env->sd_allow_root = 1; break;
		case 'v': env->sd_verbose = 1; break;
		default: opt_other(ch, "logbox-searchd", usage_text);
		}
	}
	if (optind != argc || env->sd_data == NULL || env->sd_sock == NULL)
		opt_usage(usage_text);
	if (((env->sd_ar_settings != NULL) + (env->sd_ar_state != NULL) +
	    (env->sd_ar_cache != NULL)) % 3 != 0)
		fatalx("--archive-settings, --archive-state and --archive-cache go together");
	if (env->sd_ar_cache_mb == 0)
		env->sd_ar_cache_mb = 1024;
	/* One caller alone never takes every worker: another's request starts at once. */
	if (env->sd_max_per_caller == 0)
		env->sd_max_per_caller = env->sd_threads > 1 ? env->sd_threads - 1 : 1;
	if (env->sd_max_queued_per_caller == 0)
		env->sd_max_queued_per_caller = SD_CALLER_QUEUE;
	if (!term_cache_set)
		env->sd_term_cache_mb = (uint64_t)(LB_BLOB_BUDGET >> 20) * (uint64_t)env->sd_threads;
}

static void
sig_cb(evutil_socket_t sig, short what, void *arg)
{
	struct searchd *env = arg;

	(void)what;
	if (sig == SIGHUP) {
		atomic_fetch_add(&env->sd_generation, 1);
		log_info("SIGHUP: store handles will be reopened");
		return;
	}
	if (!env->sd_stopping) {
		log_info("%s: stopping after %llu requests in flight", strsignal(sig),
		    (unsigned long long)env->sd_inflight);
		sd_notify(0, "STOPPING=1\nSTATUS=stopping");
	}
	http_stop(env);
}

int
main(int argc, char **argv)
{
	static const int	 sigs[3] = { SIGTERM, SIGINT, SIGHUP };
	struct searchd		 env;
	struct lb_catalog	*cat;
	struct stat		 sb;
	int			 fd, rc;

	memset(&env, 0, sizeof(env));
	env.sd_pipe[0] = env.sd_pipe[1] = -1;
	pthread_mutex_init(&env.sd_mtx, NULL);
	pthread_cond_init(&env.sd_cond, NULL);
	pthread_mutex_init(&env.sd_catmtx, NULL);
	pthread_mutex_init(&env.sd_armtx, NULL);
	atomic_init(&env.sd_generation, 0);
	log_init(SD_NAME, LOGL_INFO);
	parse_options(&env, argc, argv);
	log_setlevel(env.sd_verbose ? LOGL_DEBUG : LOGL_INFO);
	priv_check(env.sd_user, env.sd_allow_root);
	if (stat(env.sd_data, &sb) == -1)
		fatal("%s: %s", __func__, env.sd_data);
	if (!S_ISDIR(sb.st_mode))
		fatalx("%s: %s is not a directory", __func__, env.sd_data);
	if (env.sd_cache_segments != 0)
		log_info("--cache-segments %llu: the library sizes its segment cache itself; "
		    "open store handles are bounded to %d per thread",
		    (unsigned long long)env.sd_cache_segments, SD_STORES_PER_WORKER);
	signal(SIGPIPE, SIG_IGN);

	fd = sock_listen(env.sd_sock, 128);
	priv_drop(env.sd_user, &env.sd_sock, 1);
	if ((rc = pool_catalog(&env, &cat)) == ENOENT)
		log_warnx("%s: no catalog in %s yet: answering 503 until indexd creates it",
		    __func__, env.sd_data);
	else if (rc != 0)
		fatalx("%s: lb_catalog_open %s: %s", __func__, env.sd_data, lb_strerror(rc));

	if (env.sd_ar_cache != NULL) {
		if ((rc = lb_acache_open(env.sd_ar_cache, env.sd_ar_cache_mb << 20,
		    &env.sd_acache)) != 0)
			fatalx("%s: --archive-cache %s: %s", __func__, env.sd_ar_cache,
			    lb_strerror(rc));
		log_info("archived days read in place: cache %s (%llu MiB), settings %s, state %s",
		    env.sd_ar_cache, (unsigned long long)env.sd_ar_cache_mb, env.sd_ar_settings,
		    env.sd_ar_state);
	}
	if ((rc = metrics_new(&env.sd_metrics)) != 0)
		fatalx("%s: metrics_new: %s", __func__, strerror(rc));
	if ((env.sd_base = event_base_new()) == NULL)
		fatalx("%s: event_base_new failed", __func__);
	if ((rc = http_init(&env, fd)) != 0)
		fatalx("%s: http_init: %s", __func__, strerror(rc));
	if ((rc = pool_start(&env)) != 0)
		fatalx("%s: pool_start: %s", __func__, strerror(rc));
	signals_watch(env.sd_base, sigs, 3, env.sd_ev_sig, sig_cb, &env);
	watchdog_start(env.sd_base, &env.sd_ev_wd);
	env.sd_started = now_mono_us();
	log_info("listening on %s: data %s, %d threads (%d per caller, %d waiting per caller), "
	    "deadline %lld ms", env.sd_sock, env.sd_data, env.sd_threads, env.sd_max_per_caller,
	    env.sd_max_queued_per_caller, (long long)env.sd_deadline_ms);
	sd_notifyf(0, "READY=1\nSTATUS=listening on %s, %d threads", env.sd_sock,
	    env.sd_threads);

	if (event_base_dispatch(env.sd_base) == -1)
		log_warnx("%s: event_base_dispatch failed", __func__);

	pool_stop(&env);
	http_free(&env);
	for (int i = 0; i < 3; i++)
		if (env.sd_ev_sig[i] != NULL)
			event_free(env.sd_ev_sig[i]);
	if (env.sd_ev_wd != NULL)
		event_free(env.sd_ev_wd);
	event_base_free(env.sd_base);
	lb_catalog_close(env.sd_cat);
	for (size_t i = 0; i < env.sd_narchives; i++)
		lb_archive_unref(env.sd_archives[i].a_ar);
	free(env.sd_archives);
	lb_acache_close(env.sd_acache);
	metrics_free(env.sd_metrics);
	log_info("stopped");
	return (0);
}
