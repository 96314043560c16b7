/*
 * lb_query.c — query text to a tree and back (FORMAT.md §10.1), and the brute-force matcher
 * that defines what a query means. It owns the lexer, the grammar, the field names and value
 * rules, the glob form of term patterns and the canonical printing; it does not touch an index
 * (lb_eval.c does) and takes what a token is from lb_tokenize.c and the terms of a message
 * from lb_terms.c.
 *
 * The one idea: a query word is cut into tokens exactly as message text is, so a word that
 * holds delimiters becomes a phrase of adjacent terms, and every node prints itself back as
 * query text that parses to the same tree.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logbox.h"

/* ---------------------------------------------------------------- glob */

/*
 * Iterative matching with one backtrack point: the last '*' seen and where in s it started.
 * A later '*' replaces it (what the earlier one absorbed never needs to change), so the walk
 * is O(len(glob) * len(s)) at worst and never recurses.
 */
int
lb_glob_match(const uint8_t *glob, size_t globlen, const uint8_t *s, size_t slen)
{
	size_t	 gi = 0, si = 0, star_gi = SIZE_MAX, star_si = 0;

	while (si < slen) {
		if (gi < globlen) {
			uint8_t	 c = glob[gi];
			size_t	 step = 1;

			if (c == '*') {
				star_gi = ++gi;
				star_si = si;
				continue;
			}
			if (c == '?') {
				gi++;
				si++;
				continue;
			}
			if (c == '\\' && gi + 1 < globlen) {
				c = glob[gi + 1];
				step = 2;
			}
			if (c == s[si]) {
				gi += step;
				si++;
				continue;
			}
		}
		if (star_gi == SIZE_MAX)
			return (0);
		gi = star_gi;
		si = ++star_si;
	}
	while (gi < globlen && glob[gi] == '*')
		gi++;
	return (gi == globlen);
}
