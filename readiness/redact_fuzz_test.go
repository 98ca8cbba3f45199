package readiness_test

import (
	"strings"
	"testing"

	"github.com/drainkit/drainkit/readiness"
)

// FuzzRedact checks that a password without whitespace never survives
// Redact, whatever it holds, in the places a driver's error puts one: a
// DSN's or URL's userinfo, and a key=value pair.
func FuzzRedact(f *testing.F) {
	for _, pw := range []string{"s3cret", "Zx9/kQ+3", "p@ssw0rd", `pa"ss`, "a://b@c", `"quoted"tail`, "ab;cd,ef", "x:y@z/w"} {
		f.Add(pw)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if len(pw) < 6 || strings.ContainsAny(pw, " \t\n\v\f\r") {
			return // a password with whitespace, or short enough to occur in the text around it
		}
		for _, text := range []string{
			"dial app:" + pw + "@tcp(db:3306)/rooms: connection refused",
			`parse "redis://default:` + pw + `@cache:6379/0": invalid URL`,
			"connect (postgres://app:" + pw + "@db/rooms)",
			"host=db user=app password=" + pw + " dbname=rooms",
			"redis://cache:6379/0?password=" + pw,
			"env DB_PASSWORD=" + pw + " is set",
			`{"user":"app","password":"` + pw + `"}`,
		} {
			if strings.Count(text, pw) == 1 { // else it is also text around it, which stays
				if got := readiness.Redact(text); strings.Contains(got, pw) {
					t.Errorf("Redact(%q) = %q; want the password %q gone", text, got, pw)
				}
			}
		}
	})
}
