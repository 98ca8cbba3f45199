package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
)

// drillFlags are the drill's flags that take a value.
var drillFlags = []string{"n", "env", "ready", "start", "grace", "lb", "lag", "rate", "method", "path",
	"body", "header", "timeout", "warmup", "tail", "duration"}

// FuzzDrillFlags gives one flag of a valid command line any value: the
// drill either accepts it or refuses it with an error that names the flag.
func FuzzDrillFlags(f *testing.F) {
	for i, v := range []string{"0", "ADDR", "http://example.com:{port}/", "-1s", "1s", "nginx", "2s", "0",
		"GET", "http://example.com/", "", "NoColon", "0s", "300ms", "300ms", "1h"} {
		f.Add(uint8(i), v)
	}
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		name := drillFlags[int(which)%len(drillFlags)]
		args := []string{"-env", "A=:{port}", "-" + name, value, "--", "true"}
		if name == "lag" { // -lag is only for -lb kube
			args = append([]string{"-lb", "kube"}, args...)
		}
		_, err := parseDrill(args, io.Discard)
		if err != nil {
			assert.Contains(t, err.Error(), "-"+name, "-%s %q: got %q; want an error naming the flag", name, value, err)
		}
	})
}
