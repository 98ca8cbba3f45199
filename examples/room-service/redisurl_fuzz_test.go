package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzRedisURL builds a Redis URL from fuzzed parts, one password in the
// user info and one in the query, and parses it as each variable would.
// What is shown of it (the redacted form, the target's String) must not
// depend on the passwords: the same URL with other passwords shows exactly
// the same text. An error names the variable and holds neither password.
func FuzzRedisURL(f *testing.F) {
	f.Add("app", "s3cret", "127.0.0.1:6379", "master_name=m", "mp1234")
	f.Add("", "p@ss/w:rd", "h:1", "addr=n2:6379", "")
	f.Add("s", "sp", "h:26379", "master_name=m&addr=h2:26379", "sentinel")
	f.Add("0", "0", "0", "#", "0!")
	f.Add("0", "0 ", "0 ", "0", "0")
	f.Fuzz(func(t *testing.T, user, password, host, query, queryPassword string) {
		if strings.Contains(query, "#") {
			// What follows '#' is a fragment, which go-redis never reads a
			// password from; redact scrubs password=… there too, but a
			// value holding '&' or '#' is not told apart (TestRedact
			// keeps the common case).
			query = strings.ReplaceAll(query, "#", "")
		}
		build := func(password, queryPassword string) string {
			u := url.URL{Scheme: "redis", Host: host, RawQuery: query}
			if password != "" {
				u.User = url.UserPassword(user, password)
			} else if user != "" {
				u.User = url.User(user)
			}
			if queryPassword != "" {
				u.RawQuery = strings.TrimPrefix(u.RawQuery+"&password="+url.QueryEscape(queryPassword), "&")
			}
			return u.String()
		}
		other := func(p, alt string) string {
			if p == "" {
				return ""
			}
			return alt
		}
		raw, alt := build(password, queryPassword), build(other(password, "Other-Pass-1"), other(queryPassword, "Other-Pass-2"))
		for _, env := range []string{envURL, envSentinelURL, envClusterURL} {
			shown := func(raw string) ([]string, string) {
				target, err := parseRedis(env, raw)
				if err == nil {
					return []string{redact(raw), target.String()}, ""
				}
				assert.Contains(t, err.Error(), env, "got %q; want the variable named", err)
				return []string{redact(raw), target.String()}, err.Error()
			}
			got, gotErr := shown(raw)
			want, wantErr := shown(alt)
			assert.Equal(t, want, got, "%s=%q: what is shown depends on the passwords", env, raw)
			// Scrubbing an error replaces every occurrence of a password, so
			// the error may differ; it may not hold a password more often
			// than the other URL's error holds that text. (A password of
			// asterisks is made of the redaction mark itself.)
			for _, p := range []string{password, queryPassword} {
				if p != "" && !strings.Contains(p, "*") {
					assert.LessOrEqual(t, strings.Count(gotErr, p), strings.Count(wantErr, p), "%s=%q: a password in the error %q", env, raw, gotErr)
				}
			}
		}
	})
}
