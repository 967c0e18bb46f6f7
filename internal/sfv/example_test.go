package sfv_test

import (
	"fmt"

	"github.com/retrykit/retry/internal/sfv"
)

func ExampleScanner() {
	var s sfv.Scanner
	for s.List(`"burst";q=100;w=60, "daily";q=1000;w=86400`); s.Next(); {
		name := s.Item().Str
		for s.NextParam() {
			k, v := s.Param()
			n, _ := v.Number()
			fmt.Printf("%s: %s=%v\n", name, k, n)
		}
	}
	if err := s.Err(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// burst: q=100
	// burst: w=60
	// daily: q=1000
	// daily: w=86400
}

// A field that does not parse shows the members before its error: a
// caller keeps what it read only once Next has returned false and Err is
// nil.
func ExampleScanner_invalid() {
	var s sfv.Scanner
	members := 0
	for s.Dict("limit=50, remaining=49,"); s.Next(); {
		members++
	}
	fmt.Println(members, s.Err())
	// Output:
	// 2 sfv: a trailing ',' at offset 23
}
