package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"time"
)

// StreamEnd is one event stream (GET …/events answered 200) the balancer
// relayed, as its log has it: the gateway slot that served it ([GatewaySlot])
// and when the balancer received the request and finished relaying the
// response.
type StreamEnd struct {
	Slot       string
	Start, End time.Time
}

// StreamEnds returns the event streams that had ended by now, from the
// balancer's log (nil for the in-process balancer, which keeps none). They
// are timed by HAProxy, a process of its own, rather than by the test's
// clients: with thousands of clients the test process waits for a CPU for
// a second and more at times, and would see closes bunched together that
// the gateway spread out.
func (c *Cluster) StreamEnds() []StreamEnd { return parseStreamEnds(c.lb.Output()) }

// httplogLine matches HAProxy's httplog format as far as a stream's timing
// needs: [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST … "%r".
var httplogLine = regexp.MustCompile(`\[(\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3})\] \S+ gateways/(\S+) -?\d+/-?\d+/-?\d+/-?\d+/(\d+) 200 .*"GET \S+/events[ ?"]`)

// parseStreamEnds reads the event streams of an HAProxy log. HAProxy
// writes %tr in local time, to the millisecond.
func parseStreamEnds(log string) []StreamEnd {
	var out []StreamEnd
	for line := range strings.SplitSeq(log, "\n") {
		m := httplogLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		start, err := time.ParseInLocation("02/Jan/2006:15:04:05.000", m[1], time.Local)
		if err != nil {
			continue
		}
		ta, err := strconv.Atoi(m[3])
		if err != nil {
			continue
		}
		out = append(out, StreamEnd{Slot: m[2], Start: start, End: start.Add(time.Duration(ta) * time.Millisecond)})
	}
	return out
}
