package main

import (
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzRedisURL builds a Redis URL from fuzzed parts, one password in the
// user info and one in the query, and parses it as each variable would:
// neither password appears, as written or escaped, in the redacted form,
// in the target's String or in an error; an error names the variable. Raw
// text that is not a URL of parts is fuzzed too (redactText's path).
func FuzzRedisURL(f *testing.F) {
	f.Add("app", "s3cret", "127.0.0.1:6379", "master_name=m", "mp1234", "")
	f.Add("", "p@ss/w:rd", "h:1", "addr=n2:6379", "", "")
	f.Add("s", "sp", "h:26379", "master_name=m&addr=h2:26379", "sentinel", "")
	f.Add("", "", "", "", "", "app:s3/cret@h:1")
	f.Add("", "", "", "", "", "unix://app:s3cret@/run/redis.sock")
	f.Fuzz(func(t *testing.T, user, password, host, query, queryPassword, raw string) {
		var secrets []string
		if raw == "" {
			u := url.URL{Scheme: "redis", Host: host, RawQuery: query}
			if password != "" {
				u.User = url.UserPassword(user, password)
				secrets = append(secrets, password)
			} else if user != "" {
				u.User = url.User(user)
			}
			if queryPassword != "" {
				u.RawQuery = strings.TrimPrefix(u.RawQuery+"&password="+url.QueryEscape(queryPassword), "&")
				secrets = append(secrets, queryPassword)
			}
			raw = u.String()
		}
		for _, env := range []string{envURL, envSentinelURL, envClusterURL} {
			target, err := parseRedis(env, raw)
			shown := []string{redact(raw), target.String()}
			if err != nil {
				assert.Contains(t, err.Error(), env, "got %q; want the variable named", err)
				shown = append(shown, err.Error())
			}
			for _, p := range secrets {
				for _, form := range []string{p, url.QueryEscape(p), url.PathEscape(p), (&url.URL{User: url.UserPassword("", p)}).String()[3:]} {
					if len(form) < 4 || leaksElsewhere(raw, form, secrets) {
						continue // too short to tell from the URL's other parts
					}
					for _, s := range shown {
						assert.NotContains(t, s, form, "%s=%q: a password shown", env, raw)
					}
				}
			}
		}
	})
}

// leaksElsewhere reports whether form occurs in raw outside the
// passwords themselves (a password "6379" in ":6379"): such a form can be
// shown without any password being.
func leaksElsewhere(raw, form string, secrets []string) bool {
	rest := raw
	for _, p := range secrets {
		for _, f := range []string{url.QueryEscape(p), url.PathEscape(p), (&url.URL{User: url.UserPassword("", p)}).String()[3:], p} {
			rest = strings.ReplaceAll(rest, f, "")
		}
	}
	return strings.Contains(rest, form) || strings.Contains("redis://***?password=&addr=master_name", form)
}
