package roompb

import (
	"fmt"
	"time"
)

// WatchHeartbeatKey is the metadata key of a WatchRoom call that asks for
// heartbeats, its value a duration ("250ms"): the server then sends a
// heartbeat ([IsHeartbeat]) at once, and again whenever that long passed
// without a message. A silent stream is otherwise indistinguishable from a
// quiet room, and a client that received one heartbeat knows the server
// sends them: a stream silent for a few periods is then a frozen server.
// Servers that do not know the key send none, and clients must not expect
// one from them.
const WatchHeartbeatKey = "room-watch-heartbeat"

// Heartbeat periods a server accepts.
const (
	MinWatchHeartbeat = 10 * time.Millisecond
	MaxWatchHeartbeat = time.Minute
)

// Heartbeat returns the heartbeat of a watch of room that has sent every
// event up to seq: an event with that seq again and no command.
func Heartbeat(room string, seq int64) *RoomEvent { return &RoomEvent{RoomId: room, Seq: seq} }

// IsHeartbeat reports whether ev is a heartbeat rather than an event.
func IsHeartbeat(ev *RoomEvent) bool { return ev.GetCommandId() == "" }

// ParseWatchHeartbeat parses the value of [WatchHeartbeatKey]: an error
// names the key and the value.
func ParseWatchHeartbeat(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < MinWatchHeartbeat || d > MaxWatchHeartbeat {
		return 0, fmt.Errorf("metadata %s=%q: want a duration from %s to %s", WatchHeartbeatKey, v, MinWatchHeartbeat, MaxWatchHeartbeat)
	}
	return d, nil
}
