package sfv

import "testing"

// benchFields are the fields the Pacer reads, as servers send them.
var benchFields = []struct {
	name  string
	dict  bool
	field string
}{
	{name: "RateLimit", field: `"default";r=49;t=10`},
	{name: "RateLimit-Policy", field: `"default";q=50;w=10;pk=:cHJvZC0xMjM=:`},
	{name: "two policies", field: `"burst";q=100;w=60, "daily";q=1000;w=86400;qu="requests"`},
	{name: "draft 7", dict: true, field: "limit=50, remaining=49, reset=10"},
}

// scanAll reads every member and parameter of field, as the Pacer does,
// and returns a sum of their numbers, for the benchmark to keep.
func scanAll(dict bool, field string) float64 {
	var s Scanner
	if dict {
		s.Dict(field)
	} else {
		s.List(field)
	}
	sum := 0.0
	for s.Next() {
		n, _ := s.Item().Number()
		sum += n
		for s.NextParam() {
			_, v := s.Param()
			n, _ := v.Number()
			sum += n
		}
	}
	if s.Err() != nil {
		return -1
	}
	return sum
}

func BenchmarkScanner(b *testing.B) {
	for _, bf := range benchFields {
		b.Run(bf.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if scanAll(bf.dict, bf.field) < 0 {
					b.Fatal("the field does not parse")
				}
			}
		})
	}
}
