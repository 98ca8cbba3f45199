package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// stats holds benchstat's medians, keyed by package, benchmark name
// (without the Benchmark prefix and the -GOMAXPROCS suffix) and unit.
type stats map[string]float64

func key(pkg, name, unit string) string { return pkg + "|" + name + "|" + unit }

var procSuffix = regexp.MustCompile(`-\d+$`)

// parseCSV reads `benchstat -format csv` output of one input file: blocks
// of "pkg: …" config lines, a header, a unit line (",sec/op,CI"), then one
// row per benchmark with its median.
func parseCSV(r io.Reader) (stats, error) {
	s := stats{}
	var pkg, unit string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimPrefix(line, "pkg: ")
			continue
		case line == "" || strings.Contains(line, ": "):
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 2 {
			continue
		}
		if f[0] == "" { // header or unit line
			if len(f) >= 3 && f[2] == "CI" {
				unit = f[1]
			}
			continue
		}
		if f[0] == "geomean" {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("row %q: %w", line, err)
		}
		s[key(pkg, procSuffix.ReplaceAllString(f[0], ""), unit)] = v
	}
	return s, sc.Err()
}

// get returns a median, or NaN when the benchmark did not run.
func (s stats) get(pkg, name, unit string) float64 {
	if v, ok := s[key(pkg, name, unit)]; ok {
		return v
	}
	return math.NaN()
}

// Formatting. A missing value prints as "n/a" so a table never lies by
// omission.

func dur(sec float64) string {
	switch {
	case math.IsNaN(sec):
		return "n/a"
	case sec >= 1:
		return fmt.Sprintf("%.2f s", sec)
	case sec >= 1e-3:
		return fmt.Sprintf("%.3g ms", sec*1e3)
	case sec >= 1e-6:
		return fmt.Sprintf("%.3g µs", sec*1e6)
	}
	return fmt.Sprintf("%.3g ns", sec*1e9)
}

func msec(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	if v < 10 {
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func perSec(secPerOp float64) string {
	if math.IsNaN(secPerOp) || secPerOp == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", 1/secPerOp)
}

func ratio(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f×", v)
	}
	return fmt.Sprintf("%.2f×", v)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", v*100)
}

// verdict words a target check; NaN inputs make it "not measured".
func verdict(ok bool, measured bool) string {
	switch {
	case !measured:
		return "**not measured**"
	case ok:
		return "met"
	}
	return "**missed**"
}

// floorVerdict is verdict for a target that a floor measured in the same
// run may put out of reach: a miss whose floor (measured, and missing the
// target too) is below it says so. A floor that did not run changes
// nothing.
func floorVerdict(ok, measured, floorMisses bool) string {
	if measured && !ok && floorMisses {
		return "**missed**, as is its floor"
	}
	return verdict(ok, measured)
}

func valid(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) {
			return false
		}
	}
	return true
}

// heap formats a heap figure in B, KB or MB.
func heap(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MB", v/(1<<20))
	case v >= 10<<10:
		return fmt.Sprintf("%.0f KB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}
