# Build from the repository root:
#   docker build -f examples/deploy/room-service.Dockerfile .
FROM golang:1.26 AS build
WORKDIR /src
# The library and the examples are two modules of one workspace.
COPY go.mod go.sum go.work ./
COPY examples/go.mod examples/go.sum ./examples/
RUN go mod download && cd examples && go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/room-service ./examples/room-service
# The standard gRPC health client, for the compose healthcheck.
RUN CGO_ENABLED=0 GOBIN=/out go install github.com/grpc-ecosystem/grpc-health-probe@v0.4.62

FROM alpine:3.22
RUN adduser -D -u 10001 app
COPY --from=build /out/room-service /out/grpc-health-probe /usr/local/bin/
USER app
ENV SERVICE_NAME=room-service GRPC_ADDR=:13001 ADMIN_ADDR=:13002
EXPOSE 13001 13002
# The binary is PID 1 and handles SIGTERM itself: the drain needs no shell
# and no preStop hook.
ENTRYPOINT ["/usr/local/bin/room-service"]
