// Package testsignals lets drainkit's tests and its test helper
// fxmoduletest give a lifecycle.Manager the signals a test sends: a test
// must not signal its own process. It is internal so that no exported
// method exists only for tests.
package testsignals

import "os"

// Set makes m, a *lifecycle.Manager, read ch instead of subscribing to
// the process's SIGTERM and SIGINT: the first value drains, the second
// forces the drain, the third makes Run return lifecycle.ExitForced. Call it
// before m runs. Package lifecycle installs it (the type would otherwise
// be an import cycle); anything else panics.
var Set func(m any, ch <-chan os.Signal)
