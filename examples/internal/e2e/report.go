package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Table renders the report as the summary the demo prints and the README
// quotes.
func (r *Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(w, "%s\t%v\n", k, v) }
	row("requests sent", r.Sent)
	row("acknowledged", r.Acked)
	row("failed", fmt.Sprintf("%d (503 nothing applied: %d; no definite answer: %d, found applied: %d)", r.Failed, r.Refused, r.Unknown, r.UnknownApplied))
	row("client retries", "0 (load clients never retry)")
	row("balancer retries", r.BalancerRetries)
	row("gateway retries to room-services", r.GatewayRetries)
	row("latency during the fault p50 / p99 / max", fmt.Sprintf("%s (%d requests)", r.Latency, r.Latency.N))
	row("acknowledged writes lost", len(r.Lost))
	row("applied twice", len(r.Duplicated)+len(r.Misplaced))
	row(`acknowledged other than "applied"`, len(r.AckedNotApplied))
	row("two owners at once", len(r.DoubleOwners))
	row("fence regressions", len(r.FenceRegressions))
	row("rooms handed over", fmt.Sprintf("%d (%d hand-overs, %d leases lost)", r.RoomsHandedOver, len(r.Gaps), r.LeasesLost))
	row("hand-over gap p50 / p99 / max", r.Gap)
	if len(r.RoomsPerNode) > 0 {
		row("rooms per node as the fault began", Spread(r.RoomsPerNode))
	}
	for _, d := range r.Drained {
		row("drained "+d.Name, fmt.Sprintf("exit %d after %s", d.ExitCode, d.DrainTime.Round(time.Millisecond)))
	}
	w.Flush()
	return b.String()
}

// FormatTimeline renders transitions relative to zero: "t+1234ms node
// old→new (reason)".
func FormatTimeline(trs []Transition, zero time.Time) string {
	var b strings.Builder
	for _, t := range trs {
		fmt.Fprintf(&b, "t+%6dms  %-10s %s → %s (%s)\n", t.At.Sub(zero).Milliseconds(), t.Node, t.Old, t.New, t.Reason)
	}
	return b.String()
}

// AwaitOwned waits until the room-services' lease events show at least n
// rooms held: the load has reached every room.
func (c *Cluster) AwaitOwned(ctx context.Context, n int) error {
	for {
		o := c.Ownership()
		if len(o.Holds) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: %d rooms owned; want %d: %w", len(o.Holds), n, ctx.Err())
		case <-time.After(20 * time.Millisecond): // the logs of external processes
		}
	}
}

// AwaitBalanced waits until rooms rooms are owned and no running
// room-service holds more than ceil(rooms/nodes)+1 of them (the bound the
// room-services' balancing keeps at steady state), and returns the rooms
// per running node it saw then, zeros included.
func (c *Cluster) AwaitBalanced(ctx context.Context, rooms int) (map[string]int, error) {
	for {
		per, owned := c.roomsPerRunningNode()
		if owned >= rooms && mostRooms(per) <= BalanceBound(owned, len(per)) {
			return per, nil
		}
		select {
		case <-ctx.Done():
			return per, fmt.Errorf("e2e: rooms per node %s; want every one of %d rooms owned and at most ceil(rooms/nodes)+1 on a node: %w",
				Spread(per), rooms, ctx.Err())
		case <-time.After(20 * time.Millisecond): // the logs of external processes
		}
	}
}

// roomsPerRunningNode counts the rooms each running room-service holds now,
// and the rooms held in all.
func (c *Cluster) roomsPerRunningNode() (map[string]int, int) {
	held := c.Ownership().RoomsPerNode(time.Now())
	per := map[string]int{}
	owned := 0
	for _, n := range c.Rooms() {
		per[n.Name] = held[n.Name]
		owned += held[n.Name]
	}
	return per, owned
}

// BalanceBound is the most rooms one of nodes may hold at steady state:
// ceil(rooms/nodes)+1.
func BalanceBound(rooms, nodes int) int {
	if nodes == 0 {
		return 0
	}
	return (rooms+nodes-1)/nodes + 1
}

func mostRooms(per map[string]int) int {
	most := 0
	for _, n := range per {
		most = max(most, n)
	}
	return most
}

// AwaitOwnedBy waits until the node named node holds at least one room.
func (c *Cluster) AwaitOwnedBy(ctx context.Context, node string) error {
	for {
		for _, hs := range c.Ownership().Holds {
			for _, h := range hs {
				if h.Node == node && h.Open {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: %s holds no room: %w", node, ctx.Err())
		case <-time.After(20 * time.Millisecond): // the logs of external processes
		}
	}
}

// AwaitReady waits until n answers ready.
func (c *Cluster) AwaitReady(ctx context.Context, n *Node) error { return waitReady(ctx, n) }

// Busiest returns the running room-service that holds the most rooms.
func (c *Cluster) Busiest() *Node {
	held := map[string]int{}
	for _, hs := range c.Ownership().Holds {
		for _, h := range hs {
			if h.Open {
				held[h.Node]++
			}
		}
	}
	var best *Node
	for _, n := range c.Rooms() {
		if best == nil || held[n.Name] > held[best.Name] {
			best = n
		}
	}
	return best
}

// AwaitTakenOver waits until every room node held when it ended (crashed,
// or left its leases to expire) has a later holder.
func (c *Cluster) AwaitTakenOver(ctx context.Context, node string) error {
	for {
		orphaned := 0
		for _, hs := range c.Ownership().Holds {
			if last := hs[len(hs)-1]; last.Node == node {
				orphaned++
			}
		}
		if orphaned == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("e2e: %d rooms of %s not taken over: %w", orphaned, node, ctx.Err())
		case <-time.After(20 * time.Millisecond): // the logs of external processes
		}
	}
}

// Spread renders rooms per node, "room-1: 7, room-2: 6, room-3: 7 (max
// 7; ceil(20/3)+1 = 8)".
func Spread(perNode map[string]int) string {
	var parts []string
	total, most := 0, 0
	for _, node := range slices.Sorted(maps.Keys(perNode)) {
		n := perNode[node]
		parts = append(parts, fmt.Sprintf("%s: %d", node, n))
		total += n
		most = max(most, n)
	}
	nodes := len(perNode)
	return fmt.Sprintf("%s (max %d; ceil(%d/%d)+1 = %d)", strings.Join(parts, ", "), most, total, nodes, BalanceBound(total, nodes))
}
