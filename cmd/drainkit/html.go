package main

import (
	"fmt"
	"html"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// life is one instance's life as the page draws it; a zero time is a
// moment the drill did not see (an instance never stopped, a service
// without a drain report).
type life struct {
	name string
	old  bool
	// started: the process began; ready: its readiness first answered 2xx;
	// sigterm: the drill sent SIGTERM; flip: its drain began (the report's
	// start); intake: its phase stop_intake began; removed: the kube
	// balancer's endpoint removal; exited: the process ended.
	started, ready, sigterm, flip, intake, removed, exited time.Time
}

// picture is what -html draws: the verdict and the timeline behind it.
type picture struct {
	v        *verdict
	outcomes []outcome
	lives    []life
	update   *update
}

// bucket is the width of one bar of the request chart.
const bucket = 100 * time.Millisecond

// outcomeClasses are the request outcomes in the order the bars stack
// them, each with its colour: "ok", then the failure causes.
var outcomeClasses = []struct{ class, color, label string }{
	{"ok", "#43a047", "succeeded"},
	{causeRefused, "#e53935", "connection refused"},
	{causeReset, "#fb8c00", "reset"},
	{causeTimeout, "#8e24aa", "timeout"},
	{cause5xx, "#ad1457", "5xx"},
	{causeUnavailable, "#e53935", "UNAVAILABLE"},
	{causeDeadline, "#8e24aa", "DEADLINE_EXCEEDED"},
	{causeOther, "#757575", "other"},
}

// writeHTML writes the page to path.
func writeHTML(path string, p *picture) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("-html %q: %w", path, err)
	}
	if err := p.write(f); err != nil {
		f.Close()
		return fmt.Errorf("-html %q: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("-html %q: %w", path, err)
	}
	return nil
}

// span is the page's time axis: from the first instance's start to the
// last answer or exit.
func (p *picture) span() (begin, end time.Time) {
	for _, l := range p.lives {
		if !l.started.IsZero() && (begin.IsZero() || l.started.Before(begin)) {
			begin = l.started
		}
		end = latest(end, l.exited)
	}
	for _, o := range p.outcomes {
		if begin.IsZero() || o.sent.Before(begin) {
			begin = o.sent
		}
		end = latest(end, o.answered)
	}
	return begin, latest(end, p.update.end)
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Page geometry, in SVG user units (pixels).
const (
	leftMargin  = 60
	chartHeight = 180
	marksHeight = 24
	laneHeight  = 26
	axisHeight  = 22
)

// write renders the page: one self-contained HTML document, inline SVG
// and CSS, no script and nothing fetched.
func (p *picture) write(w io.Writer) error {
	begin, end := p.span()
	n := int(end.Sub(begin)/bucket) + 1
	barW := max(2.0, min(40.0, 1600.0/float64(n)))
	width := leftMargin + float64(n)*barW + 20
	x := func(t time.Time) float64 { return leftMargin + float64(t.Sub(begin))/float64(bucket)*barW }

	counts := make([]map[string]int, n)
	for i := range counts {
		counts[i] = map[string]int{}
	}
	for _, o := range p.outcomes {
		c := o.cause
		if c == "" {
			c = "ok"
		}
		counts[int(o.sent.Sub(begin)/bucket)][c]++
	}
	peak := 1
	for _, c := range counts {
		total := 0
		for _, k := range c {
			total += k
		}
		peak = max(peak, total)
	}

	var b strings.Builder
	title := "drainkit drill: " + html.EscapeString(p.v.title())
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%s</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:18px;margin:0 0 4px}
.verdict{font-weight:bold}.pass{color:#2e7d32}.fail{color:#c62828}
table{border-collapse:collapse;margin:12px 0}td,th{padding:2px 10px 2px 0;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}
svg{display:block;margin:16px 0}svg text{font:11px system-ui,sans-serif;fill:#444}
.legend span{display:inline-block;margin-right:14px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
</style></head><body>
<h1>%s</h1>
`, title, title)
	p.writeSummary(&b)

	height := chartHeight + marksHeight + float64(len(p.lives))*laneHeight + 2*axisHeight + 10
	fmt.Fprintf(&b, `<svg width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="requests and instances over time">`+"\n",
		width, height, width, height)
	// The update, shaded behind everything.
	fmt.Fprintf(&b, `<rect x="%.1f" y="0" width="%.1f" height="%.0f" fill="#e3f2fd"><title>the update: %s</title></rect>`+"\n",
		x(p.update.start), max(x(p.update.end)-x(p.update.start), 1), height-axisHeight, p.v.Update)
	writeAxis(&b, begin, end, x, 0, height-axisHeight)

	// Requests per bucket, stacked by outcome.
	fmt.Fprintf(&b, `<text x="%d" y="14">%s sent per %s, by outcome; the grey line is %d</text>`+"\n", leftMargin, p.v.unit(), bucket, peak)
	for i, c := range counts {
		y := float64(chartHeight)
		for _, oc := range outcomeClasses {
			k := c[oc.class]
			if k == 0 {
				continue
			}
			h := float64(k) / float64(peak) * (chartHeight - 30)
			y -= h
			from := time.Duration(i) * bucket
			fmt.Fprintf(&b, `<rect class="%s" data-n="%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s–%s: %d %s</title></rect>`+"\n",
				oc.class, k, leftMargin+float64(i)*barW, y, max(barW-0.5, 1), h, oc.color,
				seconds(from), seconds(from+bucket), k, oc.label)
		}
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="30" y2="30" stroke="#ccc"/>`+"\n", leftMargin, width-20)

	// Each failure, marked where it was sent, with its cause.
	top := float64(chartHeight)
	fmt.Fprintf(&b, `<text x="4" y="%.0f">failures</text>`+"\n", top+16)
	for _, o := range p.outcomes {
		if o.cause == "" {
			continue
		}
		fmt.Fprintf(&b, `<line class="failure %s" x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="1.5"><title>%s after %s: %s</title></line>`+"\n",
			o.cause, x(o.sent), x(o.sent), top+4, top+marksHeight-2, colorOf(o.cause), words(o.cause), seconds(o.sent.Sub(begin)), html.EscapeString(o.err))
	}

	// Each instance's life.
	top += marksHeight
	for i, l := range p.lives {
		writeLane(&b, l, top+float64(i)*laneHeight, begin, end, x)
	}
	b.WriteString("</svg>\n")
	writeLegend(&b, p.v.causes())
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSummary writes the verdict's counts, each cell with an id, and the
// old instances' lines.
func (p *picture) writeSummary(b *strings.Builder) {
	v := p.v
	if v.Pass {
		fmt.Fprintf(b, `<p class="verdict pass">%s</p>`+"\n", html.EscapeString(v.passed()))
	} else {
		b.WriteString(`<p class="verdict fail">FAIL</p><ul>` + "\n")
		for _, pr := range v.Problems {
			fmt.Fprintf(b, "<li>%s</li>\n", html.EscapeString(pr))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("<table>\n")
	row := func(id, label string, n int) {
		fmt.Fprintf(b, `<tr><th>%s</th><td class="n" id="%s">%d</td></tr>`+"\n", label, id, n)
	}
	row("sent", v.unit()+" sent", v.Sent)
	row("succeeded", "succeeded", v.Succeeded)
	row("failed", "failed", v.Failed)
	for _, c := range v.causes() {
		row("failed-"+c, "&nbsp;&nbsp;"+words(c), v.FailedBy[c])
	}
	row("client-retries", "client retries", v.ClientRetries)
	row("balancer-retries", "balancer retries", v.BalancerRetries)
	b.WriteString("</table>\n<table>\n")
	for _, o := range v.Old {
		fmt.Fprintf(b, "<tr><th>old %s</th><td>%s</td></tr>\n", html.EscapeString(o.Name), html.EscapeString(o.summary()))
	}
	b.WriteString("</table>\n")
}

// writeAxis writes a tick and a grid line every second (every 5 or 10
// on a long drill).
func writeAxis(b *strings.Builder, begin, end time.Time, x func(time.Time) float64, top, bottom float64) {
	step := time.Second
	for _, s := range []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second} {
		if end.Sub(begin)/step > 40 {
			step = s
		}
	}
	for t := time.Duration(0); t <= end.Sub(begin); t += step {
		at := x(begin.Add(t))
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#eee"/><text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n",
			at, at, top, bottom, at, bottom+14, seconds(t))
	}
}

// writeLane writes one instance: starting (grey), serving (green),
// draining (blue) after its SIGTERM, and its moments as marks.
func writeLane(b *strings.Builder, l life, top float64, begin, end time.Time, x func(time.Time) float64) {
	mid := top + laneHeight/2
	kind := "new"
	if l.old {
		kind = "old"
	}
	fmt.Fprintf(b, `<text x="4" y="%.0f">%s %s</text>`+"\n", mid+4, kind, html.EscapeString(l.name))
	stop := l.exited
	if stop.IsZero() {
		stop = end
	}
	seg := func(from, to time.Time, color, what string) {
		if from.IsZero() || to.IsZero() || !to.After(from) {
			return
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%.0f" width="%.1f" height="12" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
			x(from), mid-6, max(x(to)-x(from), 1), color, html.EscapeString(l.name), what, to.Sub(from).Round(time.Millisecond))
	}
	serving := l.sigterm
	if serving.IsZero() {
		serving = stop
	}
	seg(l.started, firstOf(l.ready, serving), "#bdbdbd", "starting")
	seg(l.ready, serving, "#81c784", "serving")
	seg(l.sigterm, stop, "#64b5f6", "draining")
	// Moments close together (intake stopped, then exit) stay apart: one
	// is drawn above the lane's middle, the other below.
	mark := func(t time.Time, color, what string, from, to float64, dashed bool) {
		if t.IsZero() {
			return
		}
		dash := ""
		if dashed {
			dash = ` stroke-dasharray="3,2"`
		}
		fmt.Fprintf(b, `<line class="moment" x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s><title>%s %s at %s</title></line>`+"\n",
			x(t), x(t), mid+from, mid+to, color, dash, html.EscapeString(l.name), what, seconds(t.Sub(begin)))
	}
	mark(l.ready, "#2e7d32", "ready", -10, 10, false)
	mark(l.sigterm, "#000", "SIGTERM", 0, 10, false)
	mark(l.flip, "#1565c0", "readiness flip (drain began)", -10, 0, false)
	mark(l.removed, "#6d4c41", "endpoint removed", -10, 10, true)
	mark(l.intake, "#ef6c00", "intake stopped", -10, 0, false)
	mark(l.exited, "#c62828", "exit", 0, 10, false)
}

// firstOf returns a, or b if a is zero.
func firstOf(a, b time.Time) time.Time {
	if a.IsZero() {
		return b
	}
	return a
}

// writeLegend writes what each colour and mark means.
func writeLegend(b *strings.Builder, causes []string) {
	b.WriteString(`<p class="legend">`)
	for _, oc := range outcomeClasses {
		if oc.class != "ok" && !slices.Contains(causes, oc.class) {
			continue
		}
		fmt.Fprintf(b, `<span><i style="background:%s"></i>%s</span>`, oc.color, oc.label)
	}
	b.WriteString("</p>\n<p class=\"legend\">")
	for _, m := range []struct{ color, label string }{
		{"#bdbdbd", "starting"}, {"#81c784", "serving"}, {"#64b5f6", "after SIGTERM"}, {"#2e7d32", "| ready"},
		{"#000", "| SIGTERM"}, {"#1565c0", "| readiness flip"}, {"#6d4c41", "¦ endpoint removed (kube, roundrobin)"},
		{"#ef6c00", "| intake stopped"}, {"#c62828", "| exit"},
	} {
		fmt.Fprintf(b, `<span><i style="background:%s"></i>%s</span>`, m.color, m.label)
	}
	b.WriteString("</p>\n<p>Hover a bar, a failure or a mark for its figures. The shaded band is the update.</p>\n")
}

// colorOf is a cause's colour.
func colorOf(class string) string {
	for _, oc := range outcomeClasses {
		if oc.class == class {
			return oc.color
		}
	}
	return "#757575"
}

// seconds writes d as seconds with one decimal: "12.3s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }
