/*
 * gencorpus.c — writes the search benchmark's corpus (tests/bench/search.py builds and runs it;
 * not part of liblogbox). It owns only the expansion of the loghub samples into N time-sorted
 * RFC 5424 lines: each output line is a sample line (its PRI, program, msgid and message, the
 * message being the original loghub line) with a host drawn from a few thousand, a pid per
 * stream, a share of the message's digit runs redrawn, and a time stamp spread over the span
 * with a day/night rhythm. Lines come in runs of 20-400 consecutive sample lines (a stream of
 * one program), as real logs do. Same arguments, same bytes (its own PRNG, no libc rand).
 *
 * usage: gencorpus TEMPLATES N SEED START_EPOCH SPAN_S HOSTS_PER_SYSTEM OUT
 * TEMPLATES: one sample line per line, fields separated by 0x1f:
 *   system-name 0x1f pri 0x1f app 0x1f pid 0x1f msgid 0x1f message
 * Prints "lines bytes" on stdout.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct tpl {
	int		 sys;
	char		*pri, *app, *pid, *msgid, *msg;
	size_t		 msglen;
	uint32_t	*runs;		/* digit runs: offset << 8 | length (<= 255) */
	size_t		 nruns;
};

static uint64_t rng_s;

static uint64_t
rnd(void)
{
	uint64_t z = (rng_s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t
below(uint64_t n)
{
	return rnd() % n;
}

static double
unit(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static void
die(const char *what)
{
	fprintf(stderr, "gencorpus: %s: %s\n", what, strerror(errno));
	exit(1);
}

static char *
field(char **p)
{
	char *s = *p, *e = strchr(s, 0x1f);

	if (e == NULL) {
		fprintf(stderr, "gencorpus: bad template line\n");
		exit(1);
	}
	*e = 0;
	*p = e + 1;
	return s;
}

int
main(int argc, char **argv)
{
	FILE		*in, *out;
	struct tpl	*t = NULL;
	size_t		 nt = 0, cap = 0, len = 0;
	char		*line = NULL, sysnames[64][32];
	int		 nsys = 0;
	ssize_t		 r;

	if (argc != 8) {
		fprintf(stderr, "usage: gencorpus TEMPLATES N SEED START_EPOCH SPAN_S "
		    "HOSTS_PER_SYSTEM OUT\n");
		return 2;
	}
	uint64_t n = strtoull(argv[2], NULL, 10);
	rng_s = strtoull(argv[3], NULL, 10) * 0x2545f4914f6cdd1dULL + 1;
	int64_t start = strtoll(argv[4], NULL, 10);
	int64_t span = strtoll(argv[5], NULL, 10);
	int hps = atoi(argv[6]);

	if ((in = fopen(argv[1], "r")) == NULL)
		die(argv[1]);
	while ((r = getline(&line, &len, in)) > 0) {
		char *p = line, *s;
		int k;

		if (line[r - 1] == '\n')
			line[--r] = 0;
		if (nt == cap) {
			cap = cap ? cap * 2 : 4096;
			if ((t = realloc(t, cap * sizeof(*t))) == NULL)
				die("realloc");
		}
		s = field(&p);
		for (k = 0; k < nsys && strcmp(sysnames[k], s) != 0; k++)
			;
		if (k == nsys) {
			if (nsys == 64)
				return 1;
			snprintf(sysnames[nsys++], sizeof(sysnames[0]), "%s", s);
		}
		t[nt].sys = k;
		t[nt].pri = strdup(field(&p));
		t[nt].app = strdup(field(&p));
		t[nt].pid = strdup(field(&p));
		t[nt].msgid = strdup(field(&p));
		t[nt].msg = strdup(p);
		t[nt].msglen = strlen(p);
		t[nt].runs = malloc((t[nt].msglen / 2 + 1) * sizeof(uint32_t));
		t[nt].nruns = 0;
		for (size_t i = 0; i < t[nt].msglen;) {
			size_t j = i;

			while (j < t[nt].msglen && t[nt].msg[j] >= '0' && t[nt].msg[j] <= '9')
				j++;
			if (j > i) {
				size_t l = j - i > 255 ? 255 : j - i;

				t[nt].runs[t[nt].nruns++] = (uint32_t)(i << 8 | l);
				i = j;
			} else
				i++;
		}
		nt++;
	}
	fclose(in);
	if (nt == 0) {
		fprintf(stderr, "gencorpus: no templates\n");
		return 1;
	}

	/* Host names: <system>-NNN, lower case; popularity Zipf-like (s = 0.9) within a system. */
	double *cdf = malloc(hps * sizeof(double)), tot = 0;
	for (int h = 0; h < hps; h++)
		cdf[h] = (tot += 1.0 / pow(h + 1, 0.9));
	for (int h = 0; h < hps; h++)
		cdf[h] /= tot;
	for (int k = 0; k < nsys; k++)
		for (char *c = sysnames[k]; *c; c++)
			if (*c >= 'A' && *c <= 'Z')
				*c += 32;

	/* Lines per minute: a day/night rhythm, quieter weekend days, some noise. */
	int64_t nmin = span / 60;
	double *w = malloc(nmin * sizeof(double)), wt = 0;
	for (int64_t m = 0; m < nmin; m++) {
		double day = (double)(m % 1440) / 1440.0;
		int wd = (int)((m / 1440) % 7);

		w[m] = (1.0 + 0.6 * sin(2 * M_PI * (day - 0.3))) * (wd >= 5 ? 0.6 : 1.0) *
		    (0.85 + 0.3 * unit());
		wt += w[m];
	}

	/* A pool of random digits to slice replacements out of. */
	enum { POOL = 1 << 20 };
	char *pool = malloc(POOL);
	for (int i = 0; i < POOL; i++)
		pool[i] = '0' + (char)below(10);

	if ((out = fopen(argv[7], "w")) == NULL)
		die(argv[7]);
	static char obuf[1 << 22];
	size_t olen = 0;
	uint64_t written = 0, done = 0;
	double acc = 0;
	size_t cur = 0, left = 0;
	int host = 0;
	char pid[16] = "";
	char tsb[40];
	int64_t lastsec = -1;

	for (int64_t m = 0; m < nmin && done < n; m++) {
		acc += w[m] / wt * (double)n;
		uint64_t upto = m == nmin - 1 ? n : (uint64_t)acc;
		if (upto > n)
			upto = n;
		uint64_t cnt = upto > done ? upto - done : 0;

		for (uint64_t j = 0; j < cnt; j++, done++) {
			int64_t us = (start + m * 60) * 1000000LL + (int64_t)(j * 60000000ULL / cnt);
			int64_t sec = us / 1000000;

			if (left == 0) {
				double u = unit();
				int lo = 0, hi = hps - 1;

				cur = below(nt);
				left = 20 + below(381);
				while (lo < hi) {
					int mid = (lo + hi) / 2;

					if (cdf[mid] < u)
						lo = mid + 1;
					else
						hi = mid;
				}
				host = lo;
				snprintf(pid, sizeof(pid), "%u", (unsigned)(100 + below(65000)));
			} else
				cur = (cur + 1) % nt;
			left--;
			struct tpl *tp = &t[cur];

			if (sec != lastsec) {
				struct tm tm;
				time_t tt = (time_t)sec;

				gmtime_r(&tt, &tm);
				strftime(tsb, sizeof(tsb), "%Y-%m-%dT%H:%M:%S", &tm);
				lastsec = sec;
			}
			if (olen + tp->msglen + 512 > sizeof(obuf)) {
				if (fwrite(obuf, 1, olen, out) != olen)
					die("write");
				written += olen;
				olen = 0;
			}
			char *o = obuf + olen;
			o += sprintf(o, "<%s>1 %s.%06dZ %s-%03d %s %s %s - ", tp->pri, tsb,
			    (int)(us % 1000000), sysnames[tp->sys], host, tp->app,
			    strcmp(tp->pid, "-") == 0 ? "-" : pid, tp->msgid);
			memcpy(o, tp->msg, tp->msglen);
			for (size_t k = 0; k < tp->nruns; k++) {
				if (below(10) < 3) {
					size_t off = tp->runs[k] >> 8, l = tp->runs[k] & 0xff;

					memcpy(o + off, pool + below(POOL - 256), l);
				}
			}
			o += tp->msglen;
			*o++ = '\n';
			olen = (size_t)(o - obuf);
		}
	}
	if (fwrite(obuf, 1, olen, out) != olen || fclose(out) != 0)
		die("write");
	written += olen;
	printf("%llu %llu\n", (unsigned long long)done, (unsigned long long)written);
	return 0;
}
