package sfv

import (
	"bytes"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The httpwg structured-field tests: JSON files of cases, each a field
// (its lines in raw), its type, and the members it must parse to, or
// must_fail; can_fail marks a case where the RFC says "SHOULD".

// vector is one case.
type vector struct {
	Name       string          `json:"name"`
	Raw        []string        `json:"raw"`
	HeaderType string          `json:"header_type"`
	Expected   json.RawMessage `json:"expected"`
	MustFail   bool            `json:"must_fail"`
	CanFail    bool            `json:"can_fail"`
}

// vectorsRel is where the vectors are from this directory: in shared/
// beside the repository's clone.
const vectorsRel = "../../../shared/testdata/structured-field-tests"

// vectorsDir returns the directory of the vectors, in shared/ beside the
// repository's clone, as CI and every worktree have it. Without it, the
// test is skipped, unless CI is set: then it fails, so that CI cannot pass
// without running the vectors.
func vectorsDir(t testing.TB) string {
	dir := filepath.FromSlash(vectorsRel)
	if _, err := os.Stat(filepath.Join(dir, "list.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but the structured-field vectors are missing: %v", err)
		}
		t.Skipf("no structured-field vectors beside the clone: %v", err)
	}
	return dir
}

// loadVectors returns the cases of every file in dir, by file name.
func loadVectors(t testing.TB, dir string) map[string][]vector {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vector files in %s: %v", dir, err)
	}
	all := map[string][]vector{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var vs []vector
		if err := json.Unmarshal(b, &vs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all[filepath.Base(f)] = vs
	}
	return all
}

// scan starts s on the joined field as a field of type ht.
func scan(s *Scanner, ht, field string) {
	switch ht {
	case "list":
		s.List(field)
	case "dictionary":
		s.Dict(field)
	default:
		s.Single(field)
	}
}

// vectorCmp compares members: ByteSeq text by its bytes, nil and empty
// slices alike.
var vectorCmp = cmp.Options{cmpopts.EquateEmpty(), cmp.Transformer("bytes", decodedBytes)}

// decodedBytes replaces a Byte Sequence's base64 text with its bytes,
// as the vectors give bytes.
func decodedBytes(it Item) Item {
	if it.Kind == ByteSeq {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(it.Str, "="))
		if err != nil {
			it.Str = "undecodable: " + it.Str
		} else {
			it.Str = string(b)
		}
	}
	return it
}

func TestVectors(t *testing.T) {
	t.Parallel()
	all := loadVectors(t, vectorsDir(t))
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ran, passed := 0, 0
			for _, v := range all[name] {
				ran++
				if err := checkVector(v); err != nil {
					t.Errorf("%s %q: %v", v.Name, v.Raw, err)
					continue
				}
				passed++
			}
			t.Logf("%s: %d cases ran, %d passed", name, ran, passed)
		})
	}
}

// checkVector parses v's field and compares the outcome with v's.
func checkVector(v vector) error {
	var s Scanner
	scan(&s, v.HeaderType, strings.Join(v.Raw, ","))
	got, err := readAll(&s)
	switch {
	case v.MustFail:
		if err == nil {
			return fmt.Errorf("parsed as %+v; want an error", got)
		}
		return nil
	case err != nil:
		if v.CanFail {
			return nil
		}
		return err
	}
	want, werr := expectedMembers(v.HeaderType, v.Expected)
	if werr != nil {
		return fmt.Errorf("bad expected value: %v", werr)
	}
	if diff := cmp.Diff(want, dedupe(got, v.HeaderType == "dictionary"), vectorCmp); diff != "" {
		if !v.CanFail || len(v.Raw) < 2 {
			return fmt.Errorf("(-want +got):\n%s", diff)
		}
		// The vectors join lines with ", ", this library's callers with
		// ",": a String split across lines differs by a space.
		scan(&s, v.HeaderType, strings.Join(v.Raw, ", "))
		got, err = readAll(&s)
		if diff := cmp.Diff(want, dedupe(got, v.HeaderType == "dictionary"), vectorCmp); err == nil && diff != "" {
			return fmt.Errorf("joined with \", \" (-want +got):\n%s", diff)
		}
	}
	return nil
}

// expectedMembers converts a case's expected value to members.
func expectedMembers(ht string, raw json.RawMessage) ([]member, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	arr, ok := x.([]any)
	if !ok {
		return nil, fmt.Errorf("not an array: %v", x)
	}
	switch ht {
	case "item":
		m, err := jsonMember(arr)
		return []member{m}, err
	case "list":
		var ms []member
		for _, e := range arr {
			m, err := jsonMember(e)
			if err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
		return ms, nil
	}
	var ms []member
	for _, e := range arr {
		kv, ok := e.([]any)
		if !ok || len(kv) != 2 {
			return nil, fmt.Errorf("not a dictionary member: %v", e)
		}
		m, err := jsonMember(kv[1])
		if err != nil {
			return nil, err
		}
		m.Key, _ = kv[0].(string)
		ms = append(ms, m)
	}
	return ms, nil
}

// jsonMember converts [bare, params] or [[items], params].
func jsonMember(x any) (member, error) {
	pair, ok := x.([]any)
	if !ok || len(pair) != 2 {
		return member{}, fmt.Errorf("not a member: %v", x)
	}
	params, err := jsonParams(pair[1])
	if err != nil {
		return member{}, err
	}
	items, ok := pair[0].([]any)
	if !ok {
		it, err := jsonBare(pair[0])
		return member{Item: it, Params: params}, err
	}
	m := member{IsInner: true, Items: []innerItem{}, Params: params}
	for _, e := range items {
		ii, err := jsonMember(e)
		if err != nil || ii.IsInner {
			return member{}, fmt.Errorf("not an inner item: %v (%v)", e, err)
		}
		m.Items = append(m.Items, innerItem{Item: ii.Item, Params: ii.Params})
	}
	return m, nil
}

// jsonParams converts [[key, bare], ...].
func jsonParams(x any) ([]param, error) {
	arr, ok := x.([]any)
	if !ok {
		return nil, fmt.Errorf("not parameters: %v", x)
	}
	var ps []param
	for _, e := range arr {
		kv, ok := e.([]any)
		if !ok || len(kv) != 2 {
			return nil, fmt.Errorf("not a parameter: %v", e)
		}
		v, err := jsonBare(kv[1])
		if err != nil {
			return nil, err
		}
		k, _ := kv[0].(string)
		ps = append(ps, param{Key: k, Val: v})
	}
	return ps, nil
}

// jsonBare converts a bare item, as the vectors' README encodes it.
func jsonBare(x any) (Item, error) {
	switch v := x.(type) {
	case json.Number:
		if strings.ContainsAny(string(v), ".eE") {
			f, err := v.Float64()
			return Item{Kind: Decimal, Dec: f}, err
		}
		n, err := v.Int64()
		return Item{Kind: Integer, Int: n}, err
	case string:
		return Item{Kind: String, Str: v}, nil
	case bool:
		return Item{Kind: Boolean, Bool: v}, nil
	case map[string]any:
		switch v["__type"] {
		case "token":
			s, _ := v["value"].(string)
			return Item{Kind: Token, Str: s}, nil
		case "displaystring":
			s, _ := v["value"].(string)
			return Item{Kind: DisplayString, Str: s}, nil
		case "date":
			n, _ := v["value"].(json.Number)
			i, err := n.Int64()
			return Item{Kind: Date, Int: i}, err
		case "binary":
			s, _ := v["value"].(string)
			b, err := base32.StdEncoding.DecodeString(s)
			// Back to base64, which decodedBytes turns into bytes again.
			return Item{Kind: ByteSeq, Str: base64.StdEncoding.EncodeToString(b)}, err
		}
	}
	return Item{}, fmt.Errorf("unknown bare item %#v", x)
}
