package sfv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzScanner checks that the Scanner never panics, that every reader
// ends, and that a caller reading any part of each member (ops says which
// calls it makes) sees the same members and the same outcome as a caller
// reading everything.
func FuzzScanner(f *testing.F) {
	seeds := []struct {
		typ   uint8
		field string
	}{
		{0, `"default";r=49;t=10`},
		{0, `"default";q=50;w=10;pk=:cHJvZC0xMjM=:, "daily";q=1000;w=86400`},
		{1, "limit=50, remaining=49, reset=10"},
		{1, "a=(1;x 2 \"s\\\"\");y=%\"%c3%bc\", b;z=@-1, c=?0"},
		{2, ` :YQ==:;a=-1.5 `},
	}
	for _, s := range seeds {
		f.Add(s.typ, s.field, []byte{0, 1, 2, 0, 2, 1, 1})
	}
	if dir := vectorsPath(); dir != "" {
		for _, vs := range loadVectors(f, dir) {
			for _, v := range vs {
				f.Add(typeNumber(v.HeaderType), strings.Join(v.Raw, ","), []byte{0, 2, 1, 2, 0})
			}
		}
	}
	f.Fuzz(func(t *testing.T, typ uint8, field string, ops []byte) {
		start := func(s *Scanner) { scan(s, [...]string{"list", "dictionary", "item"}[typ%3], field) }
		var full Scanner
		start(&full)
		wantKeys := newCounter(t, field).readFull(&full)
		wantErr := full.Err()
		if full.Next() || full.NextInner() || full.NextParam() || (full.Err() == nil) != (wantErr == nil) {
			t.Fatalf("%q: the Scanner read on after its end", field)
		}
		var s Scanner
		start(&s)
		keys := newCounter(t, field).readOps(&s, ops)
		if (s.Err() == nil) != (wantErr == nil) {
			t.Fatalf("%q read with ops %v: error %v; read in full: %v", field, ops, s.Err(), wantErr)
		}
		if strings.Join(keys, ",") != strings.Join(wantKeys, ",") {
			t.Fatalf("%q read with ops %v: keys %q; read in full: %q", field, ops, keys, wantKeys)
		}
	})
}

// counter fails a fuzz test when a Scanner's calls return true more
// often than they can: every call that does reads at least one byte, so
// a field of n bytes has fewer than n+2 of them.
type counter struct {
	t     *testing.T
	field string
	trues int
}

// newCounter returns a counter for a Scanner of field.
func newCounter(t *testing.T, field string) *counter { return &counter{t: t, field: field} }

// count counts ok, and returns it.
func (c *counter) count(ok bool) bool {
	if ok {
		c.trues++
	}
	if c.trues > len(c.field)+2 {
		c.t.Fatalf("more than %d calls returned true for %q", len(c.field)+2, c.field)
	}
	return ok
}

// readFull reads every member, inner item and parameter of s, and
// returns the members' keys.
func (c *counter) readFull(s *Scanner) []string {
	var keys []string
	for c.count(s.Next()) {
		keys = append(keys, s.Key())
		for c.count(s.NextInner()) {
			for c.count(s.NextParam()) {
			}
		}
		for c.count(s.NextParam()) {
		}
	}
	return keys
}

// readOps makes the calls ops says (Next, NextInner or NextParam, by each
// op modulo 3), then reads the members left, and returns their keys.
func (c *counter) readOps(s *Scanner, ops []byte) []string {
	var keys []string
	for _, op := range ops {
		switch op % 3 {
		case 0:
			if c.count(s.Next()) {
				keys = append(keys, s.Key())
			}
		case 1:
			c.count(s.NextInner())
		case 2:
			c.count(s.NextParam())
		}
	}
	for c.count(s.Next()) {
		keys = append(keys, s.Key())
	}
	return keys
}

// vectorsPath returns the vectors' directory, or "" without it.
func vectorsPath() string {
	dir := filepath.FromSlash(vectorsRel)
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return dir
}

// typeNumber is the typ of FuzzScanner for a vector's header_type.
func typeNumber(ht string) uint8 {
	switch ht {
	case "dictionary":
		return 1
	case "item":
		return 2
	}
	return 0
}
