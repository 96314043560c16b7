/*
 * pool.c — the worker threads that do searchd's work, and the handles they work with. It owns
 * the job queue (loop -> workers), the done queue and its wake-up pipe (workers -> loop), the
 * process's one read-only catalog, and each worker's small cache of store handles. It does not
 * know HTTP: the loop hands it jobs and gets them back answered.
 *
 * The one idea: nothing that can take time runs on the event loop, and nothing of libevent runs
 * on a worker. A worker takes the job the fair scheduler (sched.c) picks under sd_mtx, runs
 * handle_job() without any lock, puts the job on the done queue and writes one byte to a pipe;
 * the loop reads the pipe and sends the answers. A job whose client went away while it waited
 * is not run. A store handle is used by one thread only, so each worker opens its own, lazily,
 * one per logspace, at most SD_STORES_PER_WORKER of them (least recently used closed first), all on
 * the one catalog (LMDB allows an environment to be opened once per process). SIGHUP bumps a
 * generation number; a worker that sees it changed closes its handles before its next job.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "searchd.h"

struct wstore {
	char		 ws_name[LB_NAME_MAX + 1];
	struct lb_store	*ws_st;		/* NULL: free slot */
	struct lb_archive *ws_ar;	/* the archive ws_st reads (it holds a reference) */
	uint64_t	 ws_used;	/* w_tick when last used */
};

struct worker {
	struct searchd	*w_env;
	pthread_t	 w_tid;
	int		 w_idx;
	uint64_t	 w_gen;		/* sd_generation the handles belong to */
	uint64_t	 w_tick;
	struct wstore	 w_stores[SD_STORES_PER_WORKER];
};

/* The job a scheduler item is embedded in. */
#define JOB_OF(it)	((struct job *)((char *)(it) - offsetof(struct job, j_item)))

#define CATALOG_RETRY_US	1000000	/* a missing catalog is looked for again after 1 s */
#define ARCHIVE_CHECK_US	1000000	/* an archive's state is looked at again after 1 s */

struct searchd *
worker_env(struct worker *w)
{
	return (w->w_env);
}

void
job_free(struct job *j)
{
	if (j == NULL)
		return;
	if (j->j_watch != NULL)
		event_free(j->j_watch);
	free(j->j_path);
	free(j->j_query);
	free(j->j_body);
	free(j);
}

int
pool_catalog(struct searchd *env, struct lb_catalog **out)
{
	struct lb_catalog	*cat;
	int64_t			 now;
	int			 rc = 0;

	pthread_mutex_lock(&env->sd_catmtx);
	if (env->sd_cat == NULL) {
		now = now_mono_us();
		if (env->sd_cat_tried != 0 && now - env->sd_cat_tried < CATALOG_RETRY_US)
			rc = ENOENT;
		else if ((rc = lb_catalog_open(env->sd_data, LB_RDONLY, &cat)) == 0) {
			env->sd_cat = cat;
			log_info("catalog of %s opened", env->sd_data);
		} else
			env->sd_cat_tried = now;
	}
	if (rc == 0)
		*out = env->sd_cat;
	pthread_mutex_unlock(&env->sd_catmtx);
	return (rc);
}

/*
 * The archive of logspace ls (a reference: lb_archive_unref), or NULL when searchd reads no
 * archive or ls has none. Reread when logbox-archive's state or the settings changed, looked
 * at no more than once a second.
 */
struct lb_archive *
pool_archive(struct searchd *env, const char *ls)
{
	struct sd_archive	*a = NULL, *na;
	struct lb_archive	*ar;
	int64_t			 now = now_mono_us();
	char			 why[256];
	int			 rc;

	if (env->sd_acache == NULL)
		return (NULL);
	pthread_mutex_lock(&env->sd_armtx);
	for (size_t i = 0; i < env->sd_narchives && a == NULL; i++)
		if (strcmp(env->sd_archives[i].a_ls, ls) == 0)
			a = &env->sd_archives[i];
	if (a == NULL) {
		na = realloc(env->sd_archives, (env->sd_narchives + 1) * sizeof(*na));
		if (na == NULL) {
			pthread_mutex_unlock(&env->sd_armtx);
			return (NULL);
		}
		env->sd_archives = na;
		a = &na[env->sd_narchives++];
		memset(a, 0, sizeof(*a));
		snprintf(a->a_ls, sizeof(a->a_ls), "%s", ls);
	} else if (now - a->a_checked < ARCHIVE_CHECK_US ||
	    (a->a_ar != NULL && !lb_archive_stale(a->a_ar))) {
		if (now - a->a_checked >= ARCHIVE_CHECK_US)
			a->a_checked = now;
		ar = lb_archive_ref(a->a_ar);
		pthread_mutex_unlock(&env->sd_armtx);
		return (ar);
	}
	a->a_checked = now;
	rc = lb_archive_open(env->sd_acache, env->sd_ar_settings, env->sd_ar_state, ls, &ar,
	    why, sizeof(why));
	if (rc != 0 && rc != LB_ENOTFOUND) {
		/*
		 * Not readable now (a settings file half edited, a record damaged): the archive as
		 * read before goes on, and every answer says so (pool_archive_problem).
		 */
		if (!a->a_failed || strcmp(a->a_why, why) != 0)
			log_warnx("archive of %s: %s: %s", ls, why, lb_strerror(rc));
		a->a_failed = 1;
		snprintf(a->a_why, sizeof(a->a_why), "%s: %s", why, lb_strerror(rc));
		ar = lb_archive_ref(a->a_ar);
		pthread_mutex_unlock(&env->sd_armtx);
		return (ar);
	}
	a->a_failed = 0;
	if (rc != 0)
		ar = NULL;
	else {
		size_t unusable;

		log_info("archive of %s: %zu days verified", ls, lb_archive_ndays(ar, &unusable));
		if (unusable > 0)
			log_warnx("archive of %s: %zu verified days have no record of their pieces "
			    "(archived by an older logbox-archive): not searched in place", ls,
			    unusable);
	}
	lb_archive_unref(a->a_ar);
	a->a_ar = ar;
	ar = lb_archive_ref(ar);
	pthread_mutex_unlock(&env->sd_armtx);
	return (ar);
}

/* Whether ls's archive could not be read at the last look (why in buf). */
int
pool_archive_problem(struct searchd *env, const char *ls, char *buf, size_t len)
{
	int failed = 0;

	if (env->sd_acache == NULL)
		return (0);
	pthread_mutex_lock(&env->sd_armtx);
	for (size_t i = 0; i < env->sd_narchives; i++) {
		if (strcmp(env->sd_archives[i].a_ls, ls) == 0 && env->sd_archives[i].a_failed) {
			snprintf(buf, len, "%s", env->sd_archives[i].a_why);
			failed = 1;
		}
	}
	pthread_mutex_unlock(&env->sd_armtx);
	return (failed);
}

static void
worker_close_stores(struct worker *w)
{
	for (int i = 0; i < SD_STORES_PER_WORKER; i++) {
		if (w->w_stores[i].ws_st != NULL)
			lb_store_close(w->w_stores[i].ws_st);
		w->w_stores[i].ws_st = NULL;
	}
}

void
worker_store_drop(struct worker *w, const char *ls)
{
	for (int i = 0; i < SD_STORES_PER_WORKER; i++) {
		struct wstore *ws = &w->w_stores[i];

		if (ws->ws_st != NULL && strcmp(ws->ws_name, ls) == 0) {
			lb_store_close(ws->ws_st);
			ws->ws_st = NULL;
		}
	}
}

/* Gives the store the logspace's archive as it is now (when it changed). */
static void
worker_store_archive(struct worker *w, struct wstore *ws)
{
	struct lb_archive	*ar = pool_archive(w->w_env, ws->ws_name);
	int			 rc;

	if (ar != ws->ws_ar) {
		if ((rc = lb_store_set_archive(ws->ws_st, ar)) != 0)
			log_warnx("%s: %s: %s", __func__, ws->ws_name, lb_strerror(rc));
		ws->ws_ar = ar;
	}
	lb_archive_unref(ar);	/* (the store holds its own reference) */
}

int
worker_store(struct worker *w, const char *ls, struct lb_store **out)
{
	struct searchd		*env = w->w_env;
	struct lb_catalog	*cat;
	struct lb_store		*st;
	struct wstore		*ws, *victim = NULL;
	uint64_t		 gen;
	int			 rc;

	if (strlen(ls) > LB_NAME_MAX)
		return (LB_EBADCONF);
	if ((gen = atomic_load(&env->sd_generation)) != w->w_gen) {
		worker_close_stores(w);
		w->w_gen = gen;
	}
	w->w_tick++;
	for (int i = 0; i < SD_STORES_PER_WORKER; i++) {
		ws = &w->w_stores[i];
		if (ws->ws_st == NULL) {
			if (victim == NULL || victim->ws_st != NULL)
				victim = ws;
			continue;
		}
		if (strcmp(ws->ws_name, ls) == 0) {
			ws->ws_used = w->w_tick;
			worker_store_archive(w, ws);
			/* Days come and go (retention): first_id, messages, get by id. */
			(void)lb_store_refresh(ws->ws_st);
			*out = ws->ws_st;
			return (0);
		}
		if (victim == NULL || (victim->ws_st != NULL && ws->ws_used < victim->ws_used))
			victim = ws;
	}
	if ((rc = pool_catalog(env, &cat)) != 0)
		return (rc);
	if ((rc = lb_store_open_reader(cat, env->sd_data, ls, &st)) != 0)
		return (rc);
	/* The wildcard term cache is shared out among the workers (each has its handles). */
	lb_store_set_blob_budget(st, (size_t)(env->sd_term_cache_mb << 20) /
	    (size_t)env->sd_threads);
	if (victim->ws_st != NULL)
		lb_store_close(victim->ws_st);
	strcpy(victim->ws_name, ls);
	victim->ws_st = st;
	victim->ws_ar = NULL;
	victim->ws_used = w->w_tick;
	worker_store_archive(w, victim);
	*out = st;
	return (0);
}

static void *
worker_main(void *arg)
{
	struct worker		*w = arg;
	struct searchd		*env = w->w_env;
	struct sched_item	*it = NULL;
	struct job		*j;

	for (;;) {
		pthread_mutex_lock(&env->sd_mtx);
		while (!env->sd_quit && (it = sched_pop(&env->sd_sched)) == NULL)
			pthread_cond_wait(&env->sd_cond, &env->sd_mtx);
		/* The loop has stopped waiting for answers: leave what is queued. */
		if (env->sd_quit) {
			pthread_mutex_unlock(&env->sd_mtx);
			break;
		}
		pthread_mutex_unlock(&env->sd_mtx);
		j = JOB_OF(it);

		/* Nobody waits for the answer of a client that went away while it was queued. */
		if (atomic_load(&j->j_gone)) {
			metrics_error(env->sd_metrics, ERR_GONE, 1);
			j->j_status = 503;
			j->j_ctype = "application/json";
		} else
			handle_job(w, j);

		pthread_mutex_lock(&env->sd_mtx);
		sched_done(&env->sd_sched, &j->j_item);
		TAILQ_INSERT_TAIL(&env->sd_done, j, j_entry);
		/* A caller at its cap may run again: another worker may be idle. */
		pthread_cond_signal(&env->sd_cond);
		pthread_mutex_unlock(&env->sd_mtx);
		/* A full pipe already holds a wake-up: the loop drains the whole queue. */
		if (write(env->sd_pipe[1], "", 1) == -1 && errno != EAGAIN)
			log_warn("%s: write", __func__);
	}
	worker_close_stores(w);
	return (NULL);
}

/* The loop's side of the pipe: answers every job the workers have finished. */
void
pool_drain(struct searchd *env)
{
	struct jobq	 done;
	struct job	*j;
	char		 buf[256];

	while (read(env->sd_pipe[0], buf, sizeof(buf)) > 0)
		;
	TAILQ_INIT(&done);
	pthread_mutex_lock(&env->sd_mtx);
	TAILQ_CONCAT(&done, &env->sd_done, j_entry);
	pthread_mutex_unlock(&env->sd_mtx);
	while ((j = TAILQ_FIRST(&done)) != NULL) {
		TAILQ_REMOVE(&done, j, j_entry);
		http_job_done(env, j);
	}
}

static void
pool_done_cb(int fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pool_drain(arg);
}

/*
 * Queues j for caller (the X-Logbox-Caller value, "-" without one). Returns 0, EAGAIN when
 * SD_QUEUE_MAX jobs wait already, EBUSY when the caller has --max-queued-per-caller waiting,
 * or ENOMEM.
 */
int
pool_submit(struct searchd *env, struct job *j, const char *caller)
{
	int rc;

	pthread_mutex_lock(&env->sd_mtx);
	rc = sched_push(&env->sd_sched, caller, &j->j_item);
	if (rc == 0)
		pthread_cond_signal(&env->sd_cond);
	pthread_mutex_unlock(&env->sd_mtx);
	return (rc == SCHED_FULL ? EAGAIN : rc == SCHED_CALLER_FULL ? EBUSY : rc);
}

/*
 * Starts env->sd_threads workers with every signal blocked (the loop thread takes them) and
 * the pipe's read event on env->sd_base.
 */
int
pool_start(struct searchd *env)
{
	sigset_t	 all, old;
	int		 rc;

	sched_init(&env->sd_sched, (size_t)env->sd_max_per_caller,
	    (size_t)env->sd_max_queued_per_caller, SD_QUEUE_MAX);
	TAILQ_INIT(&env->sd_done);
	if (pipe2(env->sd_pipe, O_NONBLOCK | O_CLOEXEC) == -1)
		return (errno);
	env->sd_ev_done = event_new(env->sd_base, env->sd_pipe[0], EV_READ | EV_PERSIST,
	    pool_done_cb, env);
	if (env->sd_ev_done == NULL || event_add(env->sd_ev_done, NULL) == -1)
		return (ENOMEM);
	if ((env->sd_workers = calloc(env->sd_threads, sizeof(*env->sd_workers))) == NULL)
		return (errno);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < env->sd_threads; i++) {
		struct worker *w = &env->sd_workers[i];

		w->w_env = env;
		w->w_idx = i;
		w->w_gen = atomic_load(&env->sd_generation);
		if ((rc = pthread_create(&w->w_tid, NULL, worker_main, w)) != 0) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			return (rc);
		}
		env->sd_nworkers++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return (0);
}

/*
 * Joins the workers once they have finished the job they hold, and frees the jobs left (their
 * requests belong to evhttp, which frees them with the connections).
 */
void
pool_stop(struct searchd *env)
{
	struct sched_item	*it;
	struct job		*j;

	pthread_mutex_lock(&env->sd_mtx);
	env->sd_quit = 1;
	pthread_cond_broadcast(&env->sd_cond);
	pthread_mutex_unlock(&env->sd_mtx);
	for (int i = 0; i < env->sd_nworkers; i++)
		pthread_join(env->sd_workers[i].w_tid, NULL);
	env->sd_nworkers = 0;
	free(env->sd_workers);
	env->sd_workers = NULL;
	while ((j = TAILQ_FIRST(&env->sd_done)) != NULL) {
		TAILQ_REMOVE(&env->sd_done, j, j_entry);
		job_free(j);
	}
	while ((it = sched_flush(&env->sd_sched)) != NULL)
		job_free(JOB_OF(it));
	sched_free(&env->sd_sched);
	if (env->sd_ev_done != NULL)
		event_free(env->sd_ev_done);
	env->sd_ev_done = NULL;
	if (env->sd_pipe[0] != -1)
		close(env->sd_pipe[0]);
	if (env->sd_pipe[1] != -1)
		close(env->sd_pipe[1]);
	env->sd_pipe[0] = env->sd_pipe[1] = -1;
}
