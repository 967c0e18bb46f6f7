package sfv

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestSets checks the bit sets against the RFC's grammar, byte by byte.
func TestSets(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		lo, hi uint64
		want   func(c byte) bool
	}{
		{
			name: "key", lo: keyLo, hi: keyHi, // lcalpha / DIGIT / "_" / "-" / "." / "*"
			want: func(c byte) bool {
				return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0
			},
		},
		{
			name: "token", lo: tokenLo, hi: tokenHi, // tchar / ":" / "/"
			want: func(c byte) bool {
				return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
					strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
			},
		},
		{
			name: "base64", lo: base64Lo, hi: base64Hi, // ALPHA / DIGIT / "+" / "/"
			want: func(c byte) bool {
				return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/'
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for c := range 256 {
				if got, want := in(tt.lo, tt.hi, byte(c)), tt.want(byte(c)); got != want {
					t.Errorf("in(%q) = %v, want %v", rune(c), got, want)
				}
			}
		})
	}
}

// TestScanner checks fields whose outcome the vectors leave open or that
// the Pacer's fields depend on.
func TestScanner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		typ     string // "list", "dictionary" or "item"
		field   string
		want    []member
		wantErr string // a part of the error's reason; "" for none
	}{
		{
			name: "policy", typ: "list", field: `"default";q=50;w=10;pk=:cHJvZC0xMjM=:`,
			want: []member{{Item: Item{Kind: String, Str: "default"}, Params: []param{
				{Key: "q", Val: Item{Kind: Integer, Int: 50}},
				{Key: "w", Val: Item{Kind: Integer, Int: 10}},
				{Key: "pk", Val: Item{Kind: ByteSeq, Str: "cHJvZC0xMjM="}},
			}}},
		},
		{
			name: "duplicate parameters are reported as they come", typ: "list", field: "a;r=1;r=2",
			want: []member{{Item: Item{Kind: Token, Str: "a"}, Params: []param{
				{Key: "r", Val: Item{Kind: Integer, Int: 1}},
				{Key: "r", Val: Item{Kind: Integer, Int: 2}},
			}}},
		},
		{
			name: "a key alone is true", typ: "dictionary", field: "a;x, b=?0",
			want: []member{
				{Key: "a", Item: Item{Kind: Boolean, Bool: true}, Params: []param{{Key: "x", Val: Item{Kind: Boolean, Bool: true}}}},
				{Key: "b", Item: Item{Kind: Boolean}},
			},
		},
		{
			name: "escaped string", typ: "item", field: `"a\"b\\c"`,
			want: []member{{Item: Item{Kind: String, Str: `a"b\c`}}},
		},
		{
			name: "decimals round as strconv does", typ: "list", field: "0.1, -999999999999.999, 123456789012.123",
			want: []member{
				{Item: Item{Kind: Decimal, Dec: 0.1}},
				{Item: Item{Kind: Decimal, Dec: -999999999999.999}},
				{Item: Item{Kind: Decimal, Dec: 123456789012.123}},
			},
		},
		{
			name: "inner list with parameters", typ: "dictionary", field: "a=(1;x 2);y=3",
			want: []member{{Key: "a", IsInner: true,
				Items: []innerItem{
					{Item: Item{Kind: Integer, Int: 1}, Params: []param{{Key: "x", Val: Item{Kind: Boolean, Bool: true}}}},
					{Item: Item{Kind: Integer, Int: 2}},
				},
				Params: []param{{Key: "y", Val: Item{Kind: Integer, Int: 3}}},
			}},
		},
		{name: "spaces only", typ: "list", field: "   "},
		{name: "a tab before the field", typ: "list", field: "\t1", wantErr: "expected an item"},
		{name: "tabs after a list", typ: "list", field: "1\t ", want: []member{{Item: Item{Kind: Integer, Int: 1}}}},
		{name: "a tab after an item", typ: "item", field: "1\t", wantErr: "more after the item"},
		{name: "empty item", typ: "item", field: " ", wantErr: "empty item"},
		{name: "an inner list is no item", typ: "item", field: "(1)", wantErr: "expected an item"},
		{name: "trailing comma", typ: "dictionary", field: "a=1, ", wantErr: "trailing"},
		{name: "unpadded byte sequence", typ: "item", field: ":YQ:", want: []member{{Item: Item{Kind: ByteSeq, Str: "YQ"}}}},
		{name: "partial padding", typ: "item", field: ":YQ=:", wantErr: "padding"},
		{name: "too much padding", typ: "item", field: ":YWFh====:", wantErr: "padding"},
		{name: "one sextet", typ: "item", field: ":YWFhY:", wantErr: "length"},
		{name: "display string not UTF-8", typ: "item", field: `%"%ff"`, wantErr: "UTF-8"},
		{name: "display string surrogate", typ: "item", field: `%"%ed%a0%80"`, wantErr: "UTF-8"},
		{name: "a date is an integer", typ: "item", field: "@1.5", wantErr: "fraction"},
		{name: "non-ASCII", typ: "list", field: "a, ü", wantErr: "expected an item"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s Scanner
			scan(&s, tt.typ, tt.field)
			got, err := readAll(&s)
			if tt.wantErr != "" {
				var e *Error
				if !errors.As(err, &e) || !strings.Contains(e.Reason, tt.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSkipping checks that a caller that reads only part of each member
// sees the same members, and the same outcome, as one that reads all.
func TestSkipping(t *testing.T) {
	t.Parallel()
	fields := []string{
		`"default";q=50;w=10;pk=:cHJvZC0xMjM=:, "daily";q=1000;w=86400`,
		"a=(1;x 2 3);y=4, b;z, c=(), d=5",
		"(1 2)(3)",       // no ',' between inner lists
		"a=(1 2;x=\t)",   // a bad parameter in an inner item
		"a=(1;x=1\t2)",   // a tab between inner items
		"a=(1);y=:YQ=:",  // a bad parameter of an inner list
		"a=1;b=2;c=?2",   // a bad last parameter
		"a=(1 2 3",       // no ')'
		"a=1, b=(\"x\")", // fine
	}
	for _, field := range fields {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			var full Scanner
			full.Dict(field)
			all, wantErr := readAll(&full)
			var wantKeys []string
			for _, m := range all {
				wantKeys = append(wantKeys, m.Key)
			}
			readers := []struct {
				name string
				read func(s *Scanner)
			}{
				{name: "members only", read: func(*Scanner) {}},
				{name: "parameters only", read: func(s *Scanner) { readParams(s) }},
				{name: "first inner item", read: func(s *Scanner) { s.NextInner() }},
				{name: "first parameter of the first inner item", read: func(s *Scanner) {
					s.NextInner()
					s.NextParam()
				}},
			}
			for _, r := range readers {
				var s Scanner
				var keys []string
				for s.Dict(field); s.Next(); {
					keys = append(keys, s.Key())
					r.read(&s)
				}
				if (s.Err() == nil) != (wantErr == nil) {
					t.Errorf("%s: error %v, want %v", r.name, s.Err(), wantErr)
				}
				if diff := cmp.Diff(wantKeys, keys); diff != "" {
					t.Errorf("%s: keys (-want +got):\n%s", r.name, diff)
				}
			}
		})
	}
}

// TestNextParamSkipsInnerItems checks that NextParam called on an inner
// list before its items reads the inner list's own parameters.
func TestNextParamSkipsInnerItems(t *testing.T) {
	t.Parallel()
	var s Scanner
	s.List("(1;a 2;b);c")
	if !s.Next() || !s.Inner() {
		t.Fatalf("Next = false or not an inner list: %v", s.Err())
	}
	if !s.NextParam() {
		t.Fatalf("NextParam = false: %v", s.Err())
	}
	if k, _ := s.Param(); k != "c" {
		t.Errorf("Param key %q, want c", k)
	}
	if s.NextParam() || s.NextInner() || s.Next() || s.Err() != nil {
		t.Errorf("more after the one parameter, or an error: %v", s.Err())
	}
}

// TestZeroScanner checks that the zero Scanner reads nothing.
func TestZeroScanner(t *testing.T) {
	t.Parallel()
	var s Scanner
	if s.Next() || s.NextInner() || s.NextParam() || s.Err() != nil {
		t.Errorf("the zero Scanner read something, or failed: %v", s.Err())
	}
}

func TestError(t *testing.T) {
	t.Parallel()
	var s Scanner
	s.List("1, 2,")
	for s.Next() {
	}
	const want = "sfv: a trailing ',' at offset 5"
	if err := s.Err(); err == nil || err.Error() != want {
		t.Errorf("Err() = %v, want %s", err, want)
	}
}

func TestItemNumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		it   Item
		want float64
		ok   bool
	}{
		{name: "integer", it: Item{Kind: Integer, Int: -42}, want: -42, ok: true},
		{name: "decimal", it: Item{Kind: Decimal, Dec: 1.5}, want: 1.5, ok: true},
		{name: "date", it: Item{Kind: Date, Int: 1}},
		{name: "string", it: Item{Kind: String, Str: "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, ok := tt.it.Number(); got != tt.want || ok != tt.ok {
				t.Errorf("Number() = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	t.Parallel()
	got := make([]string, 0, 10)
	for k := None; k <= DisplayString+1; k++ {
		got = append(got, k.String())
	}
	want := []string{"none", "integer", "decimal", "string", "token", "byteseq", "boolean", "date", "displaystring", "kind(9)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestAllocs checks that reading the fields the Pacer reads allocates
// nothing.
func TestAllocs(t *testing.T) {
	for _, bf := range benchFields {
		allocs := testing.AllocsPerRun(100, func() { scanAll(bf.dict, bf.field) })
		if allocs != 0 {
			t.Errorf("%s: %v allocations, want 0", bf.name, allocs)
		}
	}
}
