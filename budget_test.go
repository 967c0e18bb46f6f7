package retry

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// budgetStep is one move in a scripted use of a Budget: advance the clock,
// deposit, then withdraw, in that order.
type budgetStep struct {
	advance   time.Duration // moves the fake clock first
	deposits  int           // first attempts recorded next
	withdraws int           // retries asked for last
	want      int           // of those retries, how many the budget allows
}

// budgetConfig holds the settings of a Budget, which tables cannot hold
// themselves: a Budget must not be copied.
type budgetConfig struct {
	Ratio, MinPerSecond float64
	Window              time.Duration
}

func (c budgetConfig) budget() *Budget {
	return &Budget{Ratio: c.Ratio, MinPerSecond: c.MinPerSecond, Window: c.Window}
}

// newFakeBudget returns a Budget with the settings of c on a fresh fake
// clock.
func newFakeBudget(c budgetConfig) (*Budget, *clockwork.FakeClock) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := c.budget()
	b.Clock = clock
	return b, clock
}

func TestBudget(t *testing.T) {
	t.Parallel()
	// floor2 allows 2 retries per 10 s with no traffic, and half a retry
	// per first attempt.
	floor2 := budgetConfig{Ratio: 0.5, MinPerSecond: 0.2, Window: 10 * time.Second}
	tests := []struct {
		name   string
		budget budgetConfig
		steps  []budgetStep
	}{
		{
			name:   "the floor alone allows MinPerSecond*Window retries",
			budget: budgetConfig{Ratio: 0.5, MinPerSecond: 0.5, Window: 8 * time.Second},
			steps:  []budgetStep{{withdraws: 6, want: 4}, {withdraws: 1, want: 0}},
		},
		{
			name:   "each deposit raises the allowance by Ratio",
			budget: floor2,
			steps: []budgetStep{
				{withdraws: 3, want: 2},
				{deposits: 1, withdraws: 1, want: 0}, // half a retry is no retry
				{deposits: 1, withdraws: 2, want: 1},
				{deposits: 6, withdraws: 4, want: 3},
			},
		},
		{
			name:   "a ratio that rounds below the product still earns it",
			budget: budgetConfig{Ratio: 0.58, MinPerSecond: 1e-17, Window: 10 * time.Second},
			steps:  []budgetStep{{deposits: 50, withdraws: 30, want: 29}}, // 0.58*50 is 28.999999999999996
		},
		{
			name:   "retries expire after the window",
			budget: floor2,
			steps: []budgetStep{
				{withdraws: 3, want: 2},
				{advance: 9 * time.Second, withdraws: 1, want: 0},
				{advance: time.Second, withdraws: 3, want: 2},
			},
		},
		{
			name:   "deposits expire after the window",
			budget: floor2,
			steps: []budgetStep{
				{deposits: 10, withdraws: 7, want: 7},
				{advance: 10 * time.Second, withdraws: 3, want: 2},
			},
		},
		{
			name:   "the window slides a tenth at a time",
			budget: floor2,
			steps: []budgetStep{
				{deposits: 4, withdraws: 4, want: 4},                // at 0 s: 2 earned + floor 2
				{advance: 5 * time.Second, deposits: 4},             // at 5 s: 2 more earned
				{advance: 5 * time.Second, withdraws: 5, want: 4},   // at 10 s: the first second is forgotten
				{advance: 5 * time.Second, withdraws: 1, want: 0},   // at 15 s: only the floor, spent at 10 s
				{advance: 5*time.Second - 1, withdraws: 1, want: 0}, // the retries of 10 s still count
				{advance: 1, withdraws: 3, want: 2},                 // at 20 s they do not
			},
		},
		{
			name:   "zero value takes the defaults",
			budget: budgetConfig{},
			steps: []budgetStep{
				{withdraws: 101, want: 100}, // 10 per second over 10 s
				{deposits: 25, withdraws: 3, want: 2},
				{advance: 10 * time.Second, withdraws: 101, want: 100},
			},
		},
		{
			name:   "a window shorter than its ten slices still works",
			budget: budgetConfig{Ratio: 1, MinPerSecond: 1e9, Window: 3 * time.Nanosecond},
			steps:  []budgetStep{{withdraws: 4, want: 3}, {advance: 10 * time.Nanosecond, withdraws: 4, want: 3}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, clock := newFakeBudget(tt.budget)
			for i, st := range tt.steps {
				clock.Advance(st.advance)
				for range st.deposits {
					b.Deposit()
				}
				got := 0
				for range st.withdraws {
					if b.Withdraw() {
						got++
					}
				}
				if got != st.want {
					t.Errorf("step %d: %d of %d retries allowed, want %d", i, got, st.withdraws, st.want)
				}
			}
		})
	}
}

func TestBudgetNil(t *testing.T) {
	t.Parallel()
	var b *Budget
	b.Deposit()
	for i := range 1000 {
		if !b.Withdraw() {
			t.Fatalf("Withdraw %d on a nil Budget = false, want true", i)
		}
	}
	if err := b.validate(); err != nil {
		t.Errorf("validate on a nil Budget = %v, want nil", err)
	}
}

func TestBudgetValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		budget  budgetConfig
		wantErr bool
	}{
		{name: "zero value", budget: budgetConfig{}},
		{name: "all set", budget: budgetConfig{Ratio: 0.2, MinPerSecond: 1, Window: time.Minute}},
		{name: "tiny floor", budget: budgetConfig{MinPerSecond: 1e-9}},
		{name: "negative Ratio", budget: budgetConfig{Ratio: -0.1}, wantErr: true},
		{name: "NaN Ratio", budget: budgetConfig{Ratio: math.NaN()}, wantErr: true},
		{name: "infinite Ratio", budget: budgetConfig{Ratio: math.Inf(1)}, wantErr: true},
		{name: "negative MinPerSecond", budget: budgetConfig{MinPerSecond: -1}, wantErr: true},
		{name: "NaN MinPerSecond", budget: budgetConfig{MinPerSecond: math.NaN()}, wantErr: true},
		{name: "infinite MinPerSecond", budget: budgetConfig{MinPerSecond: math.Inf(-1)}, wantErr: true},
		{name: "negative Window", budget: budgetConfig{Window: -time.Second}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.budget.budget().validate()
			if got := errors.Is(err, ErrInvalidPolicy); got != tt.wantErr {
				t.Errorf("validate() = %v; wraps ErrInvalidPolicy: %v, want %v", err, got, tt.wantErr)
			}
		})
	}
}

// TestBudgetInvalidDoesNotPanic uses Budgets that validate rejects directly,
// as a caller that never hands them to a Policy would.
func TestBudgetInvalidDoesNotPanic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		budget budgetConfig
		want   int // retries allowed of 200, with 10 deposits
	}{
		{name: "negative Window takes the default", budget: budgetConfig{Ratio: 1, Window: -time.Second}, want: 110},
		{name: "NaN Ratio refuses", budget: budgetConfig{Ratio: math.NaN()}, want: 0},
		{name: "negative Ratio lowers the floor", budget: budgetConfig{Ratio: -1}, want: 90},
		{name: "infinite MinPerSecond allows all", budget: budgetConfig{MinPerSecond: math.Inf(1)}, want: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, _ := newFakeBudget(tt.budget)
			for range 10 {
				b.Deposit()
			}
			got := 0
			for range 200 {
				if b.Withdraw() {
					got++
				}
			}
			if got != tt.want {
				t.Errorf("%d retries allowed, want %d", got, tt.want)
			}
		})
	}
}

// TestBudgetConcurrent runs Deposit and Withdraw from many goroutines at
// once (run it with -race): the budget must never allow more retries than
// it earned, nor lose deposits.
func TestBudgetConcurrent(t *testing.T) {
	t.Parallel()
	const (
		goroutines = 16
		deposits   = 500 // per goroutine
		withdraws  = 200 // per goroutine, far more than the allowance
	)
	// 0.1*16*500 = 800 earned, plus a floor of 5.
	proto := budgetConfig{Ratio: 0.1, MinPerSecond: 0.5, Window: 10 * time.Second}
	const allowance = 805
	tests := []struct {
		name string
		// sequential runs all deposits before the first withdrawal, so
		// that exactly the allowance must be granted.
		sequential bool
	}{
		{name: "deposits then withdrawals", sequential: true},
		{name: "deposits and withdrawals interleaved"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, _ := newFakeBudget(proto)
			run := func(f func()) {
				var wg sync.WaitGroup
				for range goroutines {
					wg.Go(f)
				}
				wg.Wait()
			}
			deposit := func() {
				for range deposits {
					b.Deposit()
				}
			}
			var granted atomic.Int64
			withdraw := func() {
				for range withdraws {
					if b.Withdraw() {
						granted.Add(1)
					}
				}
			}
			if tt.sequential {
				run(deposit)
				run(withdraw)
			} else {
				run(func() { deposit(); withdraw() })
			}
			got := granted.Load()
			if got > allowance || tt.sequential && got != allowance {
				t.Errorf("%d retries granted, want %s %d", got,
					map[bool]string{true: "exactly", false: "at most"}[tt.sequential], allowance)
			}
			// Once every deposit is in, the rest of the allowance, and no
			// more, is still there to take.
			for b.Withdraw() {
				got++
			}
			if got != allowance {
				t.Errorf("%d retries granted in all, want %d", got, allowance)
			}
			if b.Deposit(); b.firstAttempts(b.slice()) != goroutines*deposits+1 {
				t.Errorf("first attempts counted = %d, want %d", b.firstAttempts(b.slice()), goroutines*deposits+1)
			}
		})
	}
}

// BenchmarkBudget measures a first attempt and a retry, as a failing call
// costs them. The real clock is used, as in production.
func BenchmarkBudget(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		var bg Budget
		b.ReportAllocs()
		for b.Loop() {
			bg.Deposit()
			bg.Withdraw()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var bg Budget
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bg.Deposit()
				bg.Withdraw()
			}
		})
	})
}

// BenchmarkBudgetDeposit measures the cost every call pays: the first
// attempt's deposit.
func BenchmarkBudgetDeposit(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		var bg Budget
		b.ReportAllocs()
		for b.Loop() {
			bg.Deposit()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var bg Budget
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bg.Deposit()
			}
		})
	})
}
