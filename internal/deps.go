package deps
import (
 _ "go.uber.org/fx"
 _ "github.com/redis/go-redis/v9"
 _ "golang.org/x/sync/errgroup"
 _ "golang.org/x/sync/singleflight"
 _ "google.golang.org/grpc"
 _ "google.golang.org/grpc/health"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/stretchr/testify/require"
 _ "go.uber.org/goleak"
 _ "github.com/alicebob/miniredis/v2"
 _ "google.golang.org/protobuf/proto"
)
