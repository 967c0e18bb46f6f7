package retryredis

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// ruleModel is the Budget's rule kept the plain way, per slice, with no
// running sums: what the script must agree with.
type ruleModel struct {
	deposits, retries map[int64]float64 // by slice
}

func (m *ruleModel) settle(s int64, r retry.BudgetSettlement) int64 {
	if r.Unspent > 0 && s-r.Epoch >= 0 && s-r.Epoch < 10 {
		m.retries[r.Epoch] = math.Max(0, m.retries[r.Epoch]-float64(r.Unspent))
	}
	m.deposits[s] += float64(r.Deposits)
	var d, n float64
	for x := s - 9; x <= s; x++ {
		d += m.deposits[x]
		n += m.retries[x]
	}
	floor := r.MinPerSecond * r.Window.Seconds()
	grant := int64(math.Max(0, math.Min(float64(r.Want), math.Floor(r.Ratio*d+floor+1e-9-n))))
	m.retries[s] += float64(grant)
	return grant
}

// TestBudgetScriptModel plays random settlements of three processes
// against the script on miniredis and against ruleModel: the script's
// running sums must give the same grants as counting every slice.
func TestBudgetScriptModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 14))
		m, store := newMini(t)
		model := &ruleModel{deposits: map[int64]float64{}, retries: map[int64]float64{}}
		now := epoch0
		last := map[int]retry.BudgetLease{}
		steps := []time.Duration{0, 0, 300 * time.Millisecond, time.Second, 2500 * time.Millisecond, 7 * time.Second, 12 * time.Second}
		for i := range 150 {
			now = now.Add(steps[rng.IntN(len(steps))])
			m.SetTime(now)
			p := rng.IntN(3)
			r := rule(int64(rng.IntN(6)), int64(1+rng.IntN(6)))
			if l, ok := last[p]; ok && l.Retries > 0 {
				r.Unspent, r.Epoch = l.Retries-int64(rng.IntN(int(l.Retries)+1)), l.Epoch
			}
			got, err := store.Settle(context.Background(), r)
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, i, err)
			}
			s := now.UnixMicro() / time.Second.Microseconds()
			if want := model.settle(s, r); got.Retries != want || got.Epoch != s {
				t.Fatalf("seed %d step %d: process %d granted %d in slice %d, the model %d in slice %d",
					seed, i, p, got.Retries, got.Epoch, want, s)
			}
			last[p] = got
		}
	}
}
