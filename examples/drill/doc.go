// Package drill holds the test that runs drainkit's drill (cmd/drainkit)
// against the same small HTTP API shut down two ways, and the drainkit
// one of them (./drainkit; examples/http-naive is the other): behind a
// Kubernetes Service whose endpoint lingers after SIGTERM, the textbook
// srv.Shutdown loses requests and drainkit loses none. docs/drill.md has
// the figures and the command that reproduces them.
package drill
