package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzRedisURL builds a Redis URL from fuzzed parts, a password in the
// user info and two in the query (password=, sentinel_password=), and reads
// it through redisFromEnv as each variable would be (REDIS_ADDR, refused, too). What is shown of it
// (the redacted form, the target's String) must not depend on the
// passwords: the same URL with other passwords shows exactly the same text.
// An error names the variable and holds no password.
func FuzzRedisURL(f *testing.F) {
	f.Add("app", "s3cret", "127.0.0.1:6379", "master_name=m", "mp1234", "")
	f.Add("", "p@ss/w:rd", "h:1", "addr=n2:6379", "", "")
	f.Add("s", "sp", "h:26379", "master_name=m&addr=h2:26379", "sentinel", "sp1234")
	f.Add("0", "0", "0", "#", "0!", "")
	f.Add("0", "0 ", "0 ", "0", "0", "")
	f.Fuzz(func(t *testing.T, user, password, host, query, queryPassword, sentinelPassword string) {
		if longest(user, password, host, query, queryPassword, sentinelPassword) > maxFuzzLen {
			return
		}
		if strings.Contains(query, "#") {
			// What follows '#' is a fragment, which go-redis never reads a
			// password from; redact scrubs password=… there too, but a
			// value holding '&' or '#' is not told apart (TestRedact
			// keeps the common case).
			query = strings.ReplaceAll(query, "#", "")
		}
		build := func(password, queryPassword, sentinelPassword string) string {
			u := url.URL{Scheme: "redis", Host: host, RawQuery: query}
			if password != "" {
				u.User = url.UserPassword(user, password)
			} else if user != "" {
				u.User = url.User(user)
			}
			for _, q := range []struct{ param, p string }{{"password", queryPassword}, {"sentinel_password", sentinelPassword}} {
				if q.p != "" {
					u.RawQuery = strings.TrimPrefix(u.RawQuery+"&"+q.param+"="+url.QueryEscape(q.p), "&")
				}
			}
			return u.String()
		}
		other := func(p, alt string) string {
			if p == "" {
				return ""
			}
			return alt
		}
		raw := build(password, queryPassword, sentinelPassword)
		alt := build(other(password, "Other-Pass-1"), other(queryPassword, "Other-Pass-2"), other(sentinelPassword, "Other-Pass-3"))
		for _, env := range []string{envURL, envSentinelURL, envClusterURL, envAddr} { // REDIS_ADDR: refused, redacted
			shown := func(raw string) ([]string, string) {
				target, err := redisFromEnv(func(k string) string {
					if k == env {
						return raw
					}
					return ""
				})
				if err == nil {
					return []string{redact(raw), target.String()}, ""
				}
				assert.Contains(t, err.Error(), env, "got %q; want the variable named", err)
				return []string{redact(raw), target.String()}, err.Error()
			}
			got, gotErr := shown(raw)
			want, wantErr := shown(alt)
			assert.Equal(t, want, got, "%s=%q: got %q; want %q, as with other passwords", env, raw, got, want)
			// Scrubbing an error replaces every occurrence of a password, so
			// the error may differ; it may not hold a password more often
			// than the other URL's error holds that text. (A password of
			// asterisks is made of the redaction mark itself.)
			for _, p := range []string{password, queryPassword, sentinelPassword} {
				if p != "" && !strings.Contains(p, "*") {
					assert.LessOrEqual(t, strings.Count(gotErr, p), strings.Count(wantErr, p), "%s=%q: got %q; want no password in the error", env, raw, gotErr)
				}
			}
		}
	})
}

// maxFuzzLen bounds each fuzzed part. Longer ones reach no new code, only
// higher counts in the escaping loops, which the fuzzer takes for new
// coverage and then spends seconds minimizing (its minimizer is quadratic
// in the input's length) instead of fuzzing.
const maxFuzzLen = 64

// longest is the length of the longest of parts.
func longest(parts ...string) int {
	n := 0
	for _, p := range parts {
		n = max(n, len(p))
	}
	return n
}
