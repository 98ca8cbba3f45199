package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// LeaseEvent is one room-service "lease event" log line: a lease acquired
// (logged right after Acquire returned) or ended (logged when the node
// stopped holding it, before Redis frees the key).
type LeaseEvent struct {
	Node  string
	Event string // "acquired" or "ended"
	Room  string
	Fence int64
	Cause string
	At    time.Time
}

// Transition is one "state transition" log line.
type Transition struct {
	Node     string
	At       time.Time
	Old, New string
	Reason   string
}

type logLine struct {
	Time       time.Time `json:"time"`
	Msg        string    `json:"msg"`
	Event      string    `json:"event"`
	Room       string    `json:"room"`
	Fence      int64     `json:"fence"`
	Cause      string    `json:"cause"`
	AtUnixNano int64     `json:"at_unix_nano"`
	OldStatus  string    `json:"old_status"`
	NewStatus  string    `json:"new_status"`
	Reason     string    `json:"reason"`
}

// ParseLogs reads the lease events and state transitions from the nodes'
// JSON log lines (other lines are skipped).
func ParseLogs(nodes []*Node) ([]LeaseEvent, []Transition) {
	var evs []LeaseEvent
	var trs []Transition
	for _, n := range nodes {
		for _, line := range n.Lines() {
			if !strings.HasPrefix(line, "{") ||
				!(strings.Contains(line, `"lease event"`) || strings.Contains(line, `"state transition"`)) {
				continue
			}
			var l logLine
			if json.Unmarshal([]byte(line), &l) != nil {
				continue
			}
			switch l.Msg {
			case "lease event":
				evs = append(evs, LeaseEvent{Node: n.Name, Event: l.Event, Room: l.Room, Fence: l.Fence,
					Cause: l.Cause, At: time.Unix(0, l.AtUnixNano)})
			case "state transition":
				trs = append(trs, Transition{Node: n.Name, At: l.Time, Old: l.OldStatus, New: l.NewStatus, Reason: l.Reason})
			}
		}
	}
	sort.SliceStable(trs, func(i, j int) bool { return trs[i].At.Before(trs[j].At) })
	return evs, trs
}

// Hold is the time one node held one room under one fence.
type Hold struct {
	Node       string
	Room       string
	Fence      int64
	From, To   time.Time // To is the end event, or the process's exit
	Open       bool      // still held when the logs were read
	EndedCause string
}

// Ownership is what the lease events say about who owned which room when.
type Ownership struct {
	// Holds per room, by start time.
	Holds map[string][]Hold
	// DoubleOwners describes every pair of overlapping holds of one room.
	DoubleOwners []string
	// FenceRegressions describes every hold whose fence is not above the
	// previous hold's of the same room.
	FenceRegressions []string
	// Gaps are the hand-over gaps: from one node's end of a room to the
	// next node's acquisition of it.
	Gaps []time.Duration
	// RoomsHandedOver counts rooms held by more than one node.
	RoomsHandedOver int
	// Lost counts holds that ended because the lease was lost (not
	// released): cause names "lost".
	LeasesLost int
	// LeftToExpire counts holds a drain left to expire because their room
	// could not be flushed.
	LeftToExpire int
}

// CheckOwnership builds the holds from the events (a hold with no end
// event ends at its node's exit in exits, or is open; one reported lost
// when its node woke from a stop longer than TTL·2/3 ends at the stop, see
// [Cluster.Pause]) and checks them.
func CheckOwnership(evs []LeaseEvent, exits map[string]time.Time, stops map[string][]Window, ttl time.Duration) Ownership {
	type key struct {
		node, room string
		fence      int64
	}
	open := map[key]*Hold{}
	var holds []*Hold
	for _, e := range evs {
		k := key{e.Node, e.Room, e.Fence}
		switch e.Event {
		case "acquired":
			h := &Hold{Node: e.Node, Room: e.Room, Fence: e.Fence, From: e.At, Open: true}
			open[k] = h
			holds = append(holds, h)
		case "ended":
			if h := open[k]; h != nil {
				h.To, h.Open, h.EndedCause = e.At, false, e.Cause
				delete(open, k)
			}
		}
	}
	o := Ownership{Holds: map[string][]Hold{}}
	for _, h := range holds {
		if h.Open {
			if at, ok := exits[h.Node]; ok {
				h.To, h.Open, h.EndedCause = at, false, "process exited"
			}
		}
		if strings.Contains(h.EndedCause, "lost") {
			o.LeasesLost++
			// Only a loss the node could not see while stopped: the stop
			// outlasted what a renewal leaves a key (TTL·2/3), and the
			// loss was reported within a renewal round (TTL) of waking.
			for _, w := range stops[h.Node] {
				if h.From.Before(w.From) && !h.To.Before(w.From) &&
					w.To.Sub(w.From) >= ttl*2/3 && !h.To.After(w.To.Add(ttl)) {
					h.To, h.EndedCause = w.From, h.EndedCause+" (stopped at "+stamp(w.From)+")"
					break
				}
			}
		}
		if strings.Contains(h.EndedCause, "left to expire") {
			o.LeftToExpire++
		}
		o.Holds[h.Room] = append(o.Holds[h.Room], *h)
	}
	for room, hs := range o.Holds {
		slices.SortFunc(hs, func(a, b Hold) int { return a.From.Compare(b.From) })
		nodes := map[string]bool{}
		// last is the earlier hold that ends last (an open one ends never),
		// top the earlier hold with the highest fence: a hold must start
		// after every earlier hold ended and carry a fence above every
		// earlier one, not only its neighbour's. A long hold that spans
		// several short ones would otherwise hide overlaps with the later
		// ones, and a gap would be measured from the wrong end.
		var last, top *Hold
		for i := range hs {
			h := &hs[i]
			nodes[h.Node] = true
			if last != nil {
				overlap := last.Open || h.From.Before(last.To)
				if overlap {
					o.DoubleOwners = append(o.DoubleOwners, fmt.Sprintf("room %s: %s (fence %d) acquired at %s while %s (fence %d) held it until %s",
						room, h.Node, h.Fence, stamp(h.From), last.Node, last.Fence, endStamp(*last)))
				}
				if h.Fence <= top.Fence {
					o.FenceRegressions = append(o.FenceRegressions, fmt.Sprintf("room %s: fence %d (%s) after fence %d (%s)",
						room, h.Fence, h.Node, top.Fence, top.Node))
				}
				if !overlap && h.Node != last.Node { // an overlap is a double owner, not a gap
					o.Gaps = append(o.Gaps, h.From.Sub(last.To))
				}
			}
			if last == nil || (!last.Open && (h.Open || h.To.After(last.To))) {
				last = h
			}
			if top == nil || h.Fence > top.Fence {
				top = h
			}
		}
		if len(nodes) > 1 {
			o.RoomsHandedOver++
		}
	}
	return o
}

func stamp(t time.Time) string { return t.Format("15:04:05.000000") }

func endStamp(h Hold) string {
	if h.Open {
		return "now"
	}
	return stamp(h.To)
}

// RoomsPerNode counts the rooms each node held at the instant at; a hold
// ending at at counts (one lost while its node was stopped ends at the
// stop, see [Cluster.Pause]).
func (o Ownership) RoomsPerNode(at time.Time) map[string]int {
	n := map[string]int{}
	for _, hs := range o.Holds {
		for _, h := range hs {
			if !h.From.After(at) && (h.Open || !h.To.Before(at)) {
				n[h.Node]++
			}
		}
	}
	return n
}
