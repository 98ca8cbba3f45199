// Package harness runs real processes behind a real load balancer under a
// bounded load: the machinery shared by drainkit's end-to-end suite
// (examples/internal/e2e), its demo (examples/rolling-update) and the
// drill (cmd/drainkit).
//
// # Processes
//
// [StartProc] runs a program with its output kept line by line, in a
// process group of its own, killed by the kernel if the harness dies
// (Linux). [Proc.Kill] ends the group, so nothing a test, the demo or a
// drill started outlives it. [WaitReady] polls a readiness URL until it
// answers 2xx, as an orchestrator does.
//
// # Balancers
//
// [StartHAProxy] puts HAProxy in front of a fixed list of servers with
// active checks of a readiness path ([ProbeInterval], [ProbeFall] failures
// take a server out, one success puts it back); it retries a request only
// when its connection failed before anything was sent, never a server's
// 5xx. [StartInProcess] is the same rules in this process, for machines
// without HAProxy. [Endpoints] is a Kubernetes Service as kube-proxy makes
// it: no health checks and no retries, an endpoint leaves when told to,
// and clients dial through it.
//
// # Load
//
// [OpenLoop] starts requests at a fixed rate whatever became of the
// earlier ones, as real clients do; [NewClient] is an HTTP client that
// never resends a request by itself. [PercentilesOf] summarises latencies.
package harness
