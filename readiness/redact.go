package readiness

import (
	"context"
	"errors"
	"regexp"
	"unicode/utf8"
)

// maxMessage caps a check's error text: bodies are read by load balancers and
// people, not by debuggers.
const maxMessage = 160

var (
	// userinfo before an @: "redis://user:pass@host", "user:pass@tcp(db:3306)",
	// "redis://:pass@host".
	userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)?[^\s:/@"'()]*:[^\s@/"']+@`)
	// key=value secrets in DSNs and query strings: "password=hunter2".
	secretRE = regexp.MustCompile(`(?i)\b(password|passwd|pwd|pass|secret|token|api_?key|access_?key)(\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s&;,)]+)`)
)

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
	s = userinfoRE.ReplaceAllString(s, "${1}***@")
	s = secretRE.ReplaceAllString(s, "${1}${2}***")
	if len(s) > maxMessage {
		cut := maxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
