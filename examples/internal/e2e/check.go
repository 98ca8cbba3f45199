package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/drainkit/drainkit/internal/harness"
)

// Room is a room as read back through the API.
type Room struct {
	RoomID     string   `json:"room_id"`
	Seq        int64    `json:"seq"`
	Fence      int64    `json:"fence"`
	CommandIDs []string `json:"command_ids"`
}

// ReadRoom reads a room through the balancer, retrying a refusal (503)
// until ctx ends.
func ReadRoom(ctx context.Context, baseURL, id string) (Room, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		var rm Room
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/api/v1/rooms/"+id, nil)
		resp, err := client.Do(req)
		if err == nil {
			if resp.StatusCode == http.StatusOK {
				err = json.NewDecoder(resp.Body).Decode(&rm)
				resp.Body.Close()
				return rm, err
			}
			err = fmt.Errorf("GET room %s: %d %s", id, resp.StatusCode, readErr(resp))
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return Room{}, fmt.Errorf("e2e: read room %s: %w (last: %v)", id, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Report is the outcome of a run: the load's totals and every invariant.
type Report struct {
	Totals
	// BalancerRetries are retries the balancer made on its own.
	BalancerRetries int
	// GatewayRetries are the attempts the gateways sent again to a
	// room-service on a client's behalf.
	GatewayRetries GatewayRetries
	// Lost are acknowledged commands missing from their room.
	Lost []string
	// Duplicated are commands found more than once.
	Duplicated []string
	// Misplaced are acknowledged commands found at another seq than
	// acknowledged, or in another room.
	Misplaced []string
	// AckedNotApplied are commands acknowledged with another status than
	// "applied": the gateway answers every send of a command_id, its own
	// resends included, as the first application did.
	AckedNotApplied []string
	// UnknownApplied counts failed commands (no acknowledgement) found
	// applied: a subset of the failures, whose outcome the client did not
	// learn, not lost writes.
	UnknownApplied int
	Ownership
	// Gap summarises Ownership.Gaps.
	Gap harness.Percentiles
	// Fault is the window the scenario's fault or update spans, and
	// Latency the latency of the commands pending during it.
	Fault   Window
	Latency harness.Percentiles
	// RoomsPerNode is how many rooms each node held as the fault began:
	// how ownership was spread at steady state.
	RoomsPerNode map[string]int
	// Drained are the instances the run stopped, in order.
	Drained []Drained
}

// Problems lists every broken invariant: lost, duplicated or misplaced
// commands, commands acknowledged as anything but "applied", double
// owners, fence regressions. Failed requests are not in it: whether they
// are allowed depends on the scenario.
func (r *Report) Problems() []string {
	var p []string
	add := func(what string, xs []string) {
		for _, x := range xs {
			p = append(p, what+": "+x)
		}
	}
	add("acknowledged command lost", r.Lost)
	add("command applied more than once", r.Duplicated)
	add("command at another place than acknowledged", r.Misplaced)
	add(`command acknowledged with a status other than "applied"`, r.AckedNotApplied)
	add("two owners", r.DoubleOwners)
	add("fence did not increase", r.FenceRegressions)
	return p
}

// Check reads every room of res back and checks it against the answers,
// and checks the lease events of every room-service the cluster ran.
// Latency is measured over the commands pending during fault.
func Check(ctx context.Context, c *Cluster, res *LoadResult, drained []Drained, fault Window) (*Report, error) {
	gwRetries, err := c.GatewayRetries(ctx)
	if err != nil {
		return nil, err
	}
	r := &Report{Totals: res.Totals(), BalancerRetries: c.BalancerRetries(), GatewayRetries: gwRetries, Drained: drained,
		Fault: fault, Latency: res.LatencyDuring(fault)}
	type place struct {
		room string
		seq  int64
	}
	found := map[string][]place{}
	for _, id := range res.Rooms {
		rm, err := ReadRoom(ctx, c.URL(), id)
		if err != nil {
			return nil, err
		}
		for i, cmd := range rm.CommandIDs {
			found[cmd] = append(found[cmd], place{id, int64(i + 1)})
		}
	}
	for cmd, ps := range found {
		if len(ps) > 1 {
			r.Duplicated = append(r.Duplicated, fmt.Sprintf("%s at %v", cmd, ps))
		}
	}
	for _, o := range res.Outcomes {
		ps := found[o.CommandID]
		if o.Acked && o.Status != "applied" {
			r.AckedNotApplied = append(r.AckedNotApplied, fmt.Sprintf("%s (room %s, seq %d): %q", o.CommandID, o.Room, o.Seq, o.Status))
		}
		switch {
		case !o.Acked:
			if len(ps) > 0 {
				r.UnknownApplied++
			}
		case len(ps) == 0:
			r.Lost = append(r.Lost, fmt.Sprintf("%s (room %s, seq %d)", o.CommandID, o.Room, o.Seq))
		case ps[0].room != o.Room || ps[0].seq != o.Seq:
			r.Misplaced = append(r.Misplaced, fmt.Sprintf("%s acknowledged in %s at seq %d; found in %s at seq %d",
				o.CommandID, o.Room, o.Seq, ps[0].room, ps[0].seq))
		}
	}
	r.Ownership = c.Ownership()
	r.Gap = harness.PercentilesOf(r.Gaps)
	if !fault.From.IsZero() {
		r.RoomsPerNode = r.Ownership.RoomsPerNode(fault.From)
	}
	return r, nil
}

// Ownership checks the lease events of every room-service the cluster ran.
// A hold that no event ended ends at its process's exit as the harness saw
// it, late by the harness's latency: a hold can only look longer than it
// was, so a second owner is never hidden, at worst reported falsely. A
// hold lost while its process was stopped ends at the stop (see
// [Cluster.Pause]).
func (c *Cluster) Ownership() Ownership {
	var rooms []*Node
	exits := map[string]time.Time{}
	for _, n := range c.All() {
		if at, ok := n.Exited(); ok {
			exits[n.Name] = at
		}
		if n.Kind == "room-service" {
			rooms = append(rooms, n)
		}
	}
	evs, _ := ParseLogs(rooms)
	return CheckOwnership(evs, exits, c.stopsCopy(), c.cfg.LeaseTTL)
}

// Timeline returns the state transitions of every node, in time order.
func (c *Cluster) Timeline() []Transition {
	_, trs := ParseLogs(c.All())
	return trs
}
