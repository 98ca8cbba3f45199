module github.com/drainkit/drainkit/bench

go 1.26.0

replace github.com/drainkit/drainkit => ../

require (
	github.com/alexliesenfeld/health v0.8.0
	github.com/bsm/redislock v0.9.4
	github.com/drainkit/drainkit v0.0.0
	github.com/drainkit/drainkit/examples v0.0.0
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/hellofresh/health-go/v5 v5.5.4
	github.com/prometheus/client_golang v1.25.0
	github.com/redis/go-redis/v9 v9.24.0
	google.golang.org/grpc v1.85.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/dig v1.19.0 // indirect
	go.uber.org/fx v1.24.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.26.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/drainkit/drainkit/examples => ../examples
