package readiness

import (
	"cmp"
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxMessage caps a check's error text: bodies are read by load balancers and
// people, not by debuggers.
const maxMessage = 160

// secretRE finds key=value secrets in DSNs and query strings
// ("password=hunter2"). A value ends at whitespace only (after its
// quotes, if quoted): a password may hold the ';', ',' and '&' that
// separate pairs in some formats, and swallowing the next pair is the
// safe mistake.
// The key may end a longer name (DB_PASSWORD, PGPASSWORD) or be quoted
// ("password": in JSON, \"password\": in JSON quoted by %q). The short
// keys (pass, pwd) only after a boundary or '_': "compass:6379" is a host.
var secretRE = regexp.MustCompile(`(?i)((?:\b|_)(?:pwd|pass)|password|passwd|secret|token|api_?key|access_?key)\\?["']?(\s*[=:]\s*)((?:"[^"]*"|'[^']*')\S*|\S+)`)

// shortMessage returns err's text, short and without credentials.
func shortMessage(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "deadline exceeded"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return redact(err.Error())
}

// redact removes credentials from s (the userinfo of URLs and DSNs, and
// password=… style pairs) and cuts it to a short length. Every check's error
// passes through it on the way to a body, a log line or a metric, so a check
// never needs to redact its own errors.
func redact(s string) string {
	s = redactSpans(s, append(userinfoSpans(s), secretSpans(s)...))
	if len(s) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

var (
	// wordWithAtRE matches a whitespace-separated word holding an '@'.
	wordWithAtRE = regexp.MustCompile(`\S+@\S*`)
	// schemeRE matches a URL's scheme at a word's start, after any opening quotes or brackets.
	schemeRE = regexp.MustCompile(`^["'(<\[]*[A-Za-z][A-Za-z0-9+.\-]*://`)
)

// userinfoSpans returns where the userinfo of every word that holds one
// is ("redis://user:pass@host", "user:pass@tcp(db:3306)/x"): from the
// word's start (after its scheme, or its opening quotes and brackets) to
// its last '@', when a ':' comes before that '@' (a scheme's counts: a
// URL's user goes too). The last '@', as a DSN parser reads it: a password
// may hold '@', '/', quotes and "://". A word with no ':' before its '@'
// (alice@example.com) carries no password.
func userinfoSpans(s string) [][2]int {
	var spans [][2]int
	for _, m := range wordWithAtRE.FindAllStringIndex(s, -1) {
		w := s[m[0]:m[1]]
		at := strings.LastIndexByte(w, '@')
		start := at - len(strings.TrimLeft(w[:at], `"'(<[`))
		if !strings.Contains(w[start:at], ":") {
			continue
		}
		if sm := schemeRE.FindStringIndex(w[:at]); sm != nil {
			start = sm[1] // a URL's user alone goes too: "app://pw@tcp(…)" may be a DSN
		}
		spans = append(spans, [2]int{m[0] + start, m[0] + at})
	}
	return spans
}

// secretSpans returns where the value of every key=value secret is.
func secretSpans(s string) [][2]int {
	var spans [][2]int
	for _, m := range secretRE.FindAllStringSubmatchIndex(s, -1) {
		if v := s[m[6]:m[7]]; (v == "YES)" || v == "NO)") && strings.HasSuffix(s[:m[2]], "(using ") {
			continue // MySQL's "Access denied … (using password: YES)": whether one was sent, not one
		}
		spans = append(spans, [2]int{m[6], m[7]})
	}
	return spans
}

// redactSpans replaces each run of overlapping or touching spans of s
// with "***". Both kinds are found in the text as given: one kind's
// replacement must not hide the other (a password=… holding an '@').
func redactSpans(s string, spans [][2]int) string {
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var b strings.Builder
	done := 0 // s[:done] is written
	for i := 0; i < len(spans); {
		start, end := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] <= end; i++ {
			end = max(end, spans[i][1])
		}
		b.WriteString(s[done:start])
		b.WriteString("***")
		done = end
	}
	b.WriteString(s[done:])
	return b.String()
}
