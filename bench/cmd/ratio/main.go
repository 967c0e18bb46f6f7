// Ratio reads the output of go test -bench and prints, for every benchmark
// that has a sub-benchmark named bare, how each other sub-benchmark compares
// with it: the ratio and the difference of the medians of ns/op, cpu-ns/op,
// B/op and allocs/op. A benchmark that also has a handloop, stdtimeout or
// floor sub-benchmark (a minimal hand-written equivalent, or the least any
// equivalent must do) gets the same comparison against it.
//
//	cd bench && go test -run '^$' -bench . -benchmem -count 10 | go run ./cmd/ratio
//
// For ns/op it also prints the spread of the ratio: runs are paired in the
// order they appear (run i of a variant with run i of its reference), so
// repeated -count 1 runs, which interleave the variants, give the fairest
// pairs. Other metrics (conns/op, unclosed/op) are printed as medians.
//
// Usage: ratio [-md] [-ref bare,handloop,stdtimeout,floor] [file ...]; with no
// file it reads stdin.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

func main() {
	md := flag.Bool("md", false, "print Markdown tables")
	refs := flag.String("ref", "bare,handloop,stdtimeout,floor",
		"the sub-benchmarks the others are compared with, where present; the first is compared with every other")
	flag.Parse()
	s := newSamples()
	if flag.NArg() == 0 {
		if err := s.read(os.Stdin); err != nil {
			fail(err)
		}
	}
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fail(err)
		}
		err = s.read(f)
		_ = f.Close()
		if err != nil {
			fail(err)
		}
	}
	if len(s.groups) == 0 {
		fail(fmt.Errorf("no benchmark results in the input"))
	}
	w := newTable(os.Stdout, *md)
	s.ratios(w, strings.Split(*refs, ","))
	w.flush()
	fmt.Println()
	w = newTable(os.Stdout, *md)
	if s.extras(w) {
		w.flush()
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ratio:", err)
	os.Exit(1)
}

// samples holds every value seen, by benchmark group, variant and unit, in
// the order groups and variants first appeared.
type samples struct {
	groups   []string
	variants map[string][]string
	values   map[key][]float64
	units    []string // units beyond the four standard ones
}

type key struct{ group, variant, unit string }

func newSamples() *samples {
	return &samples{variants: make(map[string][]string), values: make(map[key][]float64)}
}

var standard = []string{"ns/op", "cpu-ns/op", "B/op", "allocs/op"}

// read parses lines such as
// "BenchmarkSuccessMem/retry-2  100  607.3 ns/op  1088 B/op  7 allocs/op".
func (s *samples) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		group, variant := split(f[0])
		if variant == "" {
			continue
		}
		if _, ok := s.variants[group]; !ok {
			s.groups = append(s.groups, group)
		}
		if !slices.Contains(s.variants[group], variant) {
			s.variants[group] = append(s.variants[group], variant)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			unit := f[i+1]
			k := key{group, variant, unit}
			s.values[k] = append(s.values[k], v)
			if !slices.Contains(standard, unit) && !slices.Contains(s.units, unit) {
				s.units = append(s.units, unit)
			}
		}
	}
	return sc.Err()
}

// split turns "BenchmarkPeers/RetryMem/rehttp-2" into "Peers/RetryMem" and
// "rehttp", dropping the GOMAXPROCS suffix.
func split(name string) (group, variant string) {
	name = strings.TrimPrefix(name, "Benchmark")
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return name, ""
	}
	return name[:i], name[i+1:]
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := slices.Clone(v)
	slices.Sort(c)
	if n := len(c); n%2 == 1 {
		return c[n/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// pairedSpread returns the smallest and largest ratio of a[i]/b[i].
func pairedSpread(a, b []float64) (lo, hi float64, n int) {
	n = min(len(a), len(b))
	for i := range n {
		if b[i] == 0 {
			continue
		}
		r := a[i] / b[i]
		if i == 0 || r < lo {
			lo = r
		}
		if i == 0 || r > hi {
			hi = r
		}
	}
	return lo, hi, n
}

// ratios prints one row per variant and reference of each group.
func (s *samples) ratios(w *table, refs []string) {
	w.row("benchmark", "variant", "vs", "time", "time range", "Δns/op", "cpu", "Δcpu-ns/op",
		"B/op", "ΔB/op", "allocs/op", "Δallocs", "n")
	for _, g := range s.groups {
		for i, ref := range refs {
			if !slices.Contains(s.variants[g], ref) {
				continue
			}
			for _, v := range s.variants[g] {
				// The first reference is compared with every variant, the
				// others with the variants that are no reference.
				if v == ref || (i > 0 && slices.Contains(refs, v)) {
					continue
				}
				s.ratioRow(w, g, v, ref)
			}
		}
	}
}

func (s *samples) ratioRow(w *table, g, v, ref string) {
	get := func(variant, unit string) []float64 { return s.values[key{g, variant, unit}] }
	ratio := func(unit string) string {
		a, b := median(get(v, unit)), median(get(ref, unit))
		switch {
		case len(get(v, unit)) == 0 || len(get(ref, unit)) == 0:
			return "-"
		case b == 0 && a == 0:
			return "1.00x"
		case b == 0:
			return "∞"
		}
		return fmt.Sprintf("%.2fx", a/b)
	}
	delta := func(unit string, f string) string {
		if len(get(v, unit)) == 0 || len(get(ref, unit)) == 0 {
			return "-"
		}
		return fmt.Sprintf(f, median(get(v, unit))-median(get(ref, unit)))
	}
	lo, hi, n := pairedSpread(get(v, "ns/op"), get(ref, "ns/op"))
	spread := "-"
	if n > 1 {
		spread = fmt.Sprintf("%.2f–%.2f", lo, hi)
	}
	w.row(g, v, ref, ratio("ns/op"), spread, delta("ns/op", "%+.0f"), ratio("cpu-ns/op"), delta("cpu-ns/op", "%+.0f"),
		ratio("B/op"), delta("B/op", "%+.0f"), ratio("allocs/op"), delta("allocs/op", "%+.0f"), strconv.Itoa(n))
}

// extras prints the medians of the non-standard metrics, if there are any.
func (s *samples) extras(w *table) bool {
	if len(s.units) == 0 {
		return false
	}
	w.row(append([]string{"benchmark", "variant"}, s.units...)...)
	for _, g := range s.groups {
		for _, v := range s.variants[g] {
			cells := []string{g, v}
			any := false
			for _, u := range s.units {
				vals := s.values[key{g, v, u}]
				if len(vals) == 0 {
					cells = append(cells, "-")
					continue
				}
				any = true
				cells = append(cells, strconv.FormatFloat(median(vals), 'g', 4, 64))
			}
			if any {
				w.row(cells...)
			}
		}
	}
	return true
}

// table prints aligned plain text or a Markdown table.
type table struct {
	md    bool
	out   io.Writer
	tw    *tabwriter.Writer
	first bool
}

func newTable(out io.Writer, md bool) *table {
	return &table{md: md, out: out, tw: tabwriter.NewWriter(out, 0, 0, 2, ' ', 0), first: true}
}

func (t *table) row(cells ...string) {
	if !t.md {
		fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
		return
	}
	fmt.Fprintln(t.out, "| "+strings.Join(cells, " | ")+" |")
	if t.first {
		fmt.Fprintln(t.out, strings.Repeat("|---", len(cells))+"|")
	}
	t.first = false
}

func (t *table) flush() { _ = t.tw.Flush() }
