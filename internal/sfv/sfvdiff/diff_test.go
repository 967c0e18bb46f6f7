package sfvdiff

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// vectorsRel is where the httpwg structured-field tests are from this
// directory: in shared/ beside the repository's clone.
const vectorsRel = "../../../../shared/testdata/structured-field-tests"

// vectorFields returns the field of every case of the vectors, its lines
// joined with ",", or nil when the vectors are missing.
func vectorFields(tb testing.TB) []string {
	files, _ := filepath.Glob(filepath.Join(filepath.FromSlash(vectorsRel), "*.json"))
	var fields []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var cases []struct {
			Raw []string `json:"raw"`
		}
		if err := json.Unmarshal(b, &cases); err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		for _, c := range cases {
			fields = append(fields, strings.Join(c.Raw, ","))
		}
	}
	return fields
}

// diffOptions compare the two readers' members: nil and empty slices
// alike, as httpsfv makes empty parameters for every item.
var diffOptions = cmpopts.EquateEmpty()

// check reads field as a field of type typ with both readers and fails t
// where they disagree.
func check(t *testing.T, typ, field string) {
	got, padded, err := readSFV(typ, field)
	if err == nil {
		// httpsfv v1.1.2 decodes with base64.StdEncoding, which rejects
		// a Byte Sequence without its '=' padding (":YQ:", measured on
		// the vectors' "bad padding"); RFC 9651, section 4.2.7, says a
		// parser SHOULD NOT fail on one, and the Scanner does not. Such
		// a field is compared with httpsfv's reading of it padded.
		field = padded
	}
	want, werr := readHTTPSFV(typ, field)
	switch {
	case err != nil && werr != nil:
		return
	case err != nil:
		t.Fatalf("%s %q: the Scanner rejects it (%v), httpsfv reads %+v", typ, field, err, want)
	case werr != nil:
		t.Fatalf("%s %q: httpsfv rejects it (%v), the Scanner reads %+v", typ, field, werr, got)
	}
	if diff := cmp.Diff(want, got, diffOptions); diff != "" {
		t.Fatalf("%s %q: httpsfv (-) and the Scanner (+) differ:\n%s", typ, field, diff)
	}
}

// seedCorpus adds the vectors' fields, and a few of the Pacer's, to f.
func seedCorpus(f *testing.F) {
	f.Add(`"default";r=49;t=10`)
	f.Add(`"default";q=50;w=10;pk=:cHJvZC0xMjM=:`)
	f.Add("limit=50, remaining=49, reset=10")
	for _, field := range vectorFields(f) {
		f.Add(field)
	}
}

func FuzzList(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, field string) { check(t, "list", field) })
}

func FuzzDict(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, field string) { check(t, "dictionary", field) })
}

func FuzzItem(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, field string) { check(t, "item", field) })
}

// TestSeeds compares the readers on every vector's field, read as each
// type of field. Without the vectors it is skipped, unless CI is set:
// then it fails, so that CI cannot pass without comparing them.
func TestSeeds(t *testing.T) {
	fields := vectorFields(t)
	if len(fields) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but the structured-field vectors are missing from %s", vectorsRel)
		}
		t.Skipf("no structured-field vectors in %s", vectorsRel)
	}
	for _, typ := range []string{"list", "dictionary", "item"} {
		t.Run(typ, func(t *testing.T) {
			t.Parallel()
			for _, field := range fields {
				t.Run("", func(t *testing.T) { check(t, typ, field) })
			}
		})
	}
	t.Logf("%d fields, each read as a list, a dictionary and an item", len(fields))
}
