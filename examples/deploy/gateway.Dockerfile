# Build from the repository root:
#   docker build -f examples/deploy/gateway.Dockerfile .
FROM golang:1.26 AS build
WORKDIR /src
# The library and the examples are two modules of one workspace.
COPY go.mod go.sum go.work ./
COPY examples/go.mod examples/go.sum ./examples/
RUN go mod download && cd examples && go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/gateway ./examples/gateway

FROM alpine:3.22
# curl, for the compose healthcheck on /healthz/ready.
RUN apk add --no-cache curl && adduser -D -u 10001 app
COPY --from=build /out/gateway /usr/local/bin/gateway
USER app
ENV SERVICE_NAME=gateway-service HTTP_ADDR=:13000
EXPOSE 13000
# The binary is PID 1 and handles SIGTERM itself.
ENTRYPOINT ["/usr/local/bin/gateway"]
