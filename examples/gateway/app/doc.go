// Package app is the gateway command (examples/gateway): its room API over
// room-service, readiness, drain and configuration, in a package of its
// own so that benchmarks outside the command can build the API handler
// ([Handler]) exactly as the gateway serves it. The command's
// documentation (API, forwarding, health, environment) is in
// examples/gateway.
package app
