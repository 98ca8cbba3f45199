// Command gateway is drainkit's example HTTP front of room-service: a JSON
// API forwarded over gRPC to a health-checked set of room-service
// backends, with readiness and a drain from drainkit.
//
//	ROOM_GRPC_ADDRS=127.0.0.1:13001 go run ./examples/gateway
//	curl -XPOST localhost:13000/api/v1/rooms/lobby/commands -d '{"command_id":"c1","op":"hello"}'
//	curl localhost:13000/api/v1/rooms/lobby
//
// # API
//
//   - POST /api/v1/rooms/{id}/commands with {"command_id": "...", "op": "..."}
//     answers 200 {"status": "applied", "seq": N}, the same for every
//     send of one command_id.
//   - GET /api/v1/rooms/{id} answers 200 {"room_id", "seq", "fence",
//     "command_ids", "snapshot_seq"}.
//   - GET /api/v1/rooms/{id}/events streams the room's commands as
//     Server-Sent Events (id: seq, data {"room_id", "seq", "command_id"}),
//     after Last-Event-ID when given: every event once, in order, across
//     room-service drains and, resuming with Last-Event-ID, the gateway's.
//
// Room and command ids are 1 to 64 characters of [A-Za-z0-9_-]; op is one
// of "hello" or "join" (roompb.Ops, a closed set: op "drop table" is
// refused naming the field and the value); the body is one JSON object
// with no other fields (unknown fields are refused, so a misspelt
// "commandId" is not read as a missing id). A request breaking any of these
// gets 400 (413 for a body over 4 KiB) with {"error": "..."} and nothing is
// forwarded.
//
// # Forwarding
//
// Backends come from ROOM_GRPC_ADDRS, with client-side health checking of
// service "room-service": a backend that turns NOT_SERVING (it is
// draining, or cannot reach Redis) gets no new RPC. A room's commands go
// to its rendezvous-hash node among the SERVING backends (so a room
// without an owner is acquired there, and rooms spread over the nodes the
// same way from every gateway); reads go round robin.
//
// Every request has a deadline: REQUEST_TIMEOUT (15s), or the client's
// shorter Request-Timeout header ("2s", "750ms"). Within it, temporary
// unavailability is waited out, not answered: a call waits for a ready
// backend; a refusal (a draining node, a room being handed over, an owner
// that refuses connections because it crashed and its lease has not
// expired yet) is retried with exponential backoff and jitter, looking
// the owner up again each time; REDIRECTs are followed, up to three in a
// row. One attempt at one backend gets ATTEMPT_TIMEOUT (1s): a backend that
// lets it pass (a frozen process, a port that accepts while nothing
// answers) is routed around, and no REDIRECT followed to it, until it
// answers a health check, so its rooms go to the next node once their
// leases are free. An attempt whose outcome is unknown (a connection that broke after
// the request reached room-service) is resent with the same command_id,
// which room-service applies at most once and answers with the first
// application's seq. The client gets 200 {"status": "applied", "seq": N}
// for a resend as for the first send.
//
// Only when the deadline is near does the client get 503 with Retry-After
// (no attempt can have been applied) or 504 (one may have been: retry
// with the same command_id). INVALID_ARGUMENT is 400 at once, anything
// unexpected 502.
//
// Requests held at once are capped (MAX_PENDING, 1024; MAX_PENDING_BYTES,
// 32 MiB of accounted memory): past either cap a request gets 503 with
// Retry-After at once, counted in gateway_requests_shed_total{cap}. Metrics
// are served on /metrics.
//
// # Health and drain
//
// /healthz/live and /healthz/ready are served on HTTP_ADDR. Ready needs the
// HTTP listener up ("http_listener") and a room-service address
// connectable ("room_grpc": grpc-go holds a ready connection to some
// address), not a room-service SERVING: a Redis outage makes every room-service not ready
// at once, and must not take every gateway out of the balancer too; the
// gateway holds requests until one is ready again. The configuration is
// checked before anything starts. On SIGTERM readiness flips, the server
// keeps serving for DRAIN_DELAY, then stops intake, waits for in-flight
// requests and closes the backend connections.
//
// # Environment
//
// ROOM_GRPC_ADDRS (required: host:port,host:port or one dns:///host:port;
// the process exits 78 naming it when missing or malformed), HTTP_ADDR
// (:13000), REQUEST_TIMEOUT (15s; less than DRAIN_TIMEOUT minus
// DRAIN_DELAY), ATTEMPT_TIMEOUT (1s; less than REQUEST_TIMEOUT), MAX_PENDING, MAX_PENDING_BYTES, SSE_MAX_CLOSE_RATE (the
// most event subscribers closed per second while draining, 200; off: all
// at once near the deadline, for comparison), SERVICE_NAME
// (gateway-service), NODE_ID, DRAIN_TIMEOUT, DRAIN_DELAY,
// HEALTH_READY_TIMEOUT. Logs are JSON on stderr; once the
// listener is up a plain line "listening on <addr>" goes to stdout.
package main

import (
	"os"

	"github.com/drainkit/drainkit/examples/gateway/app"
)

func main() {
	os.Exit(app.Main(os.Getenv, os.Stdout, os.Stderr))
}
