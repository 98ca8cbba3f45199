// Package gatewaybefore is the example gateway's room API handler as it
// was before the request-deadline change (commit 41c0e74's parent): one
// request timeout, a refused call retried once, one REDIRECT followed, no
// waiting, no call slots, no pending cap. api.go, forward.go and
// backends.go are that commit's files with the package clause changed and
// the retired status DUPLICATE named by a local constant (applyDuplicate);
// config.go keeps the part of its configuration they read. It is the
// baseline of BenchmarkGatewayApply and BenchmarkGatewayOverhead and
// nothing else.
package gatewaybefore
