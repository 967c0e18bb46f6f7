package retrygrpc

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestPushback(t *testing.T) {
	type result struct {
		D    time.Duration
		Stop bool
	}
	tests := []struct {
		name string
		vals []string // nil: no trailer
		want result
	}{
		{name: "none", vals: nil, want: result{0, false}},
		{name: "zero", vals: []string{"0"}, want: result{0, false}},
		{name: "millis", vals: []string{"1500"}, want: result{1500 * time.Millisecond, false}},
		{name: "leading zeros", vals: []string{"007"}, want: result{7 * time.Millisecond, false}},
		{name: "largest exact", vals: []string{strconv.FormatInt(int64(maxDuration/time.Millisecond), 10)},
			want: result{maxDuration / time.Millisecond * time.Millisecond, false}},
		{name: "one past largest saturates",
			vals: []string{strconv.FormatInt(int64(maxDuration/time.Millisecond)+1, 10)},
			want: result{maxDuration, false}},
		{name: "absurd saturates", vals: []string{"99999999999999999999999999999999999999"},
			want: result{maxDuration, false}},
		{name: "negative stops", vals: []string{"-1"}, want: result{0, true}},
		{name: "plus sign stops", vals: []string{"+5"}, want: result{0, true}},
		{name: "empty stops", vals: []string{""}, want: result{0, true}},
		{name: "space stops", vals: []string{" 5"}, want: result{0, true}},
		{name: "fraction stops", vals: []string{"1.5"}, want: result{0, true}},
		{name: "word stops", vals: []string{"soon"}, want: result{0, true}},
		{name: "two values stop", vals: []string{"1", "2"}, want: result{0, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			md := metadata.MD{}
			if tt.vals != nil {
				md[pushbackKey] = tt.vals
			}
			d, stop := pushback(md)
			if diff := cmp.Diff(tt.want, result{d, stop}); diff != "" {
				t.Errorf("pushback(%q) (-want +got):\n%s", tt.vals, diff)
			}
		})
	}
}

func TestRetryInfo(t *testing.T) {
	withDelay := func(d *durationpb.Duration) error {
		st, err := status.New(codes.Unavailable, "x").WithDetails(&errdetails.RetryInfo{RetryDelay: d})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	type result struct {
		D  time.Duration
		OK bool
	}
	tests := []struct {
		name string
		err  error
		want result
	}{
		{name: "plain error", err: errTest("x"), want: result{0, false}},
		{name: "no details", err: status.Error(codes.Unavailable, "x"), want: result{0, false}},
		{name: "delay", err: withDelay(durationpb.New(2 * time.Second)), want: result{2 * time.Second, true}},
		{name: "no delay field", err: withDelay(nil), want: result{0, false}},
		{name: "negative delay ignored", err: withDelay(&durationpb.Duration{Seconds: -3}), want: result{0, false}},
		{name: "huge delay saturates", err: withDelay(&durationpb.Duration{Seconds: 1 << 62}),
			want: result{maxDuration, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := retryInfo(tt.err)
			if diff := cmp.Diff(tt.want, result{d, ok}); diff != "" {
				t.Errorf("retryInfo (-want +got):\n%s", diff)
			}
		})
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// FuzzPushback checks that no trailer value panics, comes back negative,
// or is taken as a delay unless it is all digits.
func FuzzPushback(f *testing.F) {
	for _, s := range []string{"0", "1500", "-1", "", "1.5", "+5", "99999999999999999999999", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, stop := pushback(metadata.MD{pushbackKey: {s}})
		if d < 0 {
			t.Fatalf("pushback(%q) = %v, negative", s, d)
		}
		digits := s != ""
		for i := 0; i < len(s); i++ {
			digits = digits && s[i] >= '0' && s[i] <= '9'
		}
		if stop == digits {
			t.Fatalf("pushback(%q): stop = %v, but all digits = %v", s, stop, digits)
		}
		if n, err := strconv.ParseInt(s, 10, 64); digits && err == nil && n <= int64(maxDuration/time.Millisecond) {
			if want := time.Duration(n) * time.Millisecond; d != want {
				t.Fatalf("pushback(%q) = %v, want %v", s, d, want)
			}
		}
	})
}
