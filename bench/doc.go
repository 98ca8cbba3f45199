// Package bench runs drainkit side by side with the libraries a user would
// pick instead: alexliesenfeld/health and hellofresh/health-go for
// readiness, bsm/redislock and go-redsync/redsync for leases, and
// http.Server.Shutdown for the drain. It is its own module so that none of
// them enters drainkit's dependencies.
//
// Every benchmark has one sub-benchmark per contender, named c=<contender>,
// so one run yields comparable numbers and benchstat can project them into
// columns (-col /c). bench/run runs them all, several counts each, and
// rewrites the tables of BENCHMARKS.md; cmd/tables turns benchstat's output
// into those tables.
package bench
