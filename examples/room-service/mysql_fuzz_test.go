package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzSQLDSN builds a MySQL DSN from fuzzed parts, user:password@rest, and
// reads it as each DSN variable. What is shown of it (the redacted DSN, or
// the error) must not depend on the password: the same DSN with another
// password shows exactly the same text. An error names the variable.
func FuzzSQLDSN(f *testing.F) {
	f.Add("app", "s3cret", "tcp(db:3306)/rooms")
	f.Add("app", "s3cret", "db:3306/rooms")
	f.Add("app", "s3cret", "tcp(db:3306)/a?timeout=abc")
	f.Add("app", "p@ss:w/rd", "unix(/run/mysqld.sock)/rooms?parseTime=true")
	f.Add("", "", "tcp(db)/")
	f.Add("app", "hunter2/x", "tcp(db:3306)") // the driver reads "app:hunter2" as the network
	f.Fuzz(func(t *testing.T, user, password, rest string) {
		if longest(user, password, rest) > maxFuzzLen {
			return
		}
		alt := ""
		if password != "" {
			alt = "Other-Pass-1"
		}
		for _, env := range []string{"MYSQL_DSN", "ANALYTICS_DSN"} {
			shown := func(password string) (string, bool) {
				ts, err := sqlFromEnv(func(k string) string {
					if k == env {
						return user + ":" + password + "@" + rest
					}
					return ""
				})
				if err != nil {
					var ce *configError
					if assert.True(t, errors.As(err, &ce), "got %T %v; want a *configError", err, err) {
						assert.Equal(t, env, ce.Field, "got %q; want the variable named", err)
					}
					return err.Error(), false
				}
				if env == "MYSQL_DSN" {
					return ts.Primary.redacted, true
				}
				return ts.Analytics.redacted, true
			}
			got, gotOK := shown(password)
			want, wantOK := shown(alt)
			// Without a '/' after the password, the driver takes one in the
			// password for the database name's and reads no password at all
			// (what it reads, it shows); an error still hides that text.
			if !strings.Contains(rest, "/") && (gotOK || wantOK) {
				continue
			}
			dsn := user + ":" + password + "@" + rest
			if password != "" && !strings.Contains(want, password) {
				assert.NotContains(t, got, password, "%s=%q: got %q; want the password hidden", env, dsn, got)
			}
			assert.Equal(t, want, got, "%s=%q: got %q; want %q, as with another password", env, dsn, got, want)
		}
	})
}
