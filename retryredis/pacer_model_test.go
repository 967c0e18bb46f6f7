package retryredis

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrykit/retry/pace"
)

// forever is a longest wait no test reaches: the caller can wait.
const forever = 100 * 365 * 24 * time.Hour

// paceModel is the store model of the retry package (its memStore),
// written out plainly in Go on the server's clock in microseconds: what
// the scripts must agree with, step by step. Its float operations are in
// the scripts' order, and conversions stop the compiler from fusing a
// multiply and an add, so that the two agree to the last bit.
type paceModel struct {
	keys map[string]*modelKey
}

type modelKey struct {
	requests, tokens modelBucket
	blocked          int64
}

type modelBucket struct {
	limit, level, rate  float64
	window, resetAt, at int64 // microseconds
	corrected           float64
	epoch               int64
}

func (m *paceModel) key(k string) *modelKey {
	mk := m.keys[k]
	if mk == nil {
		mk = new(modelKey)
		m.keys[k] = mk
	}
	return mk
}

func (m *paceModel) reserve(key string, tokens float64, maxWait, now int64) pace.Grant {
	k := m.key(key)
	before := *k
	var g pace.Grant
	w, mark := k.requests.take(1, now)
	g.Requests = mark
	if tokens > 0 {
		tw, tmark := k.tokens.take(tokens, now)
		w, g.Tokens = math.Max(w, tw), tmark
	}
	if math.IsNaN(w) || w > 1e16 {
		w = 1e16
	}
	w = math.Max(w, 0)
	if b := float64(k.blocked - now); b > w {
		w, g.RetryAfter = b, true
	}
	if w >= float64(maxWait) {
		*k = before // a caller that gives up takes nothing
		return pace.Grant{Wait: durationOfMicros(w), RetryAfter: g.RetryAfter}
	}
	g.Wait = durationOfMicros(w)
	return g
}

func (m *paceModel) learn(key string, r pace.Report, now int64) {
	k := m.key(key)
	k.requests.learn(&r.Requests, now)
	k.tokens.learn(&r.Tokens, now)
	if r.Block > 0 {
		k.blocked = max(k.blocked, now+micros(r.Block))
	}
}

func (b *modelBucket) advance(now int64) {
	switch {
	case b.limit == 0 || now <= b.at:
		return
	case b.window == 0:
		b.level = math.Min(b.limit, b.level+b.rate*float64(now-b.at)/1e6)
	case now >= b.resetAt:
		n := (now-b.resetAt)/b.window + 1
		b.level = math.Min(math.Min(b.level, 0)+float64(float64(n)*b.limit), b.limit)
		b.resetAt += n * b.window
		b.epoch += n
	}
	b.at = now
}

// take returns the wait in microseconds and the mark.
func (b *modelBucket) take(n float64, now int64) (float64, pace.Mark) {
	if b.limit == 0 {
		return 0, pace.Mark{}
	}
	b.advance(now)
	b.level -= math.Min(n, b.limit)
	switch {
	case b.level >= 0:
		return 0, pace.Mark{Level: b.level, Corrected: b.corrected, Epoch: b.epoch}
	case b.window == 0:
		return -b.level / b.rate * 1e6, pace.Mark{Corrected: b.corrected, Epoch: b.epoch}
	}
	k := math.Ceil(-b.level / b.limit)
	wait := float64(b.resetAt-now) + float64((k-1)*float64(b.window))
	return wait, pace.Mark{Level: b.level + float64(k*b.limit), Corrected: b.corrected, Epoch: b.epoch + int64(k)}
}

func (b *modelBucket) learn(l *pace.Limit, now int64) {
	if l.Limit <= 0 {
		return
	}
	b.advance(now)
	window := micros(l.Window)
	if b.limit != l.Limit || (b.window == 0) != (window == 0) {
		debt := math.Min(b.level, 0)
		*b = modelBucket{limit: l.Limit, level: l.Remaining + debt, rate: l.Rate, window: window,
			resetAt: now + micros(l.Reset), at: now, epoch: b.epoch + 1}
		return
	}
	if window != 0 && b.window != 0 && now+micros(l.Reset) > b.resetAt+max(b.window/2, 1e6) {
		// The server's next window, while this one's end runs late.
		b.level = math.Min(b.level, 0) + b.limit
		b.window, b.resetAt, b.epoch = window, now+micros(l.Reset), b.epoch+1
		if d := b.level - l.Remaining; d > 0 {
			b.level -= d
			b.corrected += d
		}
		return
	}
	if window != 0 {
		if l.Mark.Epoch != 0 && l.Mark.Epoch != b.epoch {
			return // about another window
		}
		b.window, b.resetAt = window, now+micros(l.Reset)
	} else {
		b.rate = l.Rate
	}
	d := b.level - l.Remaining
	if l.Mark.Epoch == b.epoch {
		d = l.Mark.Level - l.Remaining - (b.corrected - l.Mark.Corrected)
	}
	if d > 0 {
		b.level -= d
		b.corrected += d
	}
}

// limitSpec is one shape of limit a random report may take.
type limitSpec struct {
	limit, rate float64
	window      time.Duration
}

var (
	requestSpecs = []limitSpec{{limit: 60, rate: 1}, {limit: 10, rate: 0.3}, {limit: 5, window: 10 * time.Second},
		{limit: 3, window: 1500 * time.Millisecond}}
	tokenSpecs = []limitSpec{{limit: 10000, rate: 150}, {limit: 4000, window: 7 * time.Second}}
)

// randomLimit is a report of spec, with a mark from marks or none.
func randomLimit(rng *rand.Rand, spec limitSpec, marks []pace.Mark) pace.Limit {
	l := pace.Limit{Limit: spec.limit, Remaining: math.Floor(rng.Float64() * (spec.limit + 1)), Rate: spec.rate}
	if rng.IntN(4) == 0 {
		l.Remaining = rng.Float64() * spec.limit
	}
	if spec.window > 0 {
		l.Window = spec.window
		l.Reset = time.Duration(rng.Int64N(int64(spec.window)))
	}
	if len(marks) > 0 && rng.IntN(5) > 0 {
		// Mostly the latest reservation's; now and then an older one.
		l.Mark = marks[len(marks)-1]
		if rng.IntN(4) == 0 {
			l.Mark = marks[rng.IntN(len(marks))]
		}
	}
	return l
}

// TestPacerStoreAgainstModel plays random reservations and reports of
// three processes on two keys, with random steps of the server's clock,
// against the scripts on miniredis and against paceModel: every grant
// must be the model's, to the bit.
func TestPacerStoreAgainstModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			m, stores := newPacerMini(t)
			procs := []*PacerStore{stores[0], stores[1], {Client: stores[0].Client, Name: "fleet"}}
			model := &paceModel{keys: map[string]*modelKey{}}
			rng := rand.New(rand.NewPCG(seed, 14))
			now := epoch0
			spec := [2][2]int{} // per key: the request and token spec in use
			marks := map[string][][2]pace.Mark{}
			ctx := context.Background()
			var seen coverage
			for i := range 150 {
				switch rng.IntN(5) {
				case 0, 1:
				case 2, 3:
					now = now.Add(time.Duration(rng.Int64N(int64(2 * time.Second))).Truncate(time.Microsecond))
				default:
					now = now.Add(time.Duration(rng.Int64N(int64(20 * time.Second))).Truncate(time.Microsecond))
				}
				m.SetTime(now)
				us := now.UnixMicro()
				p := rng.IntN(len(procs))
				key := []string{"api.example.com#ab", "api.other.com#cd"}[rng.IntN(2)]
				ki := 0
				if key != "api.example.com#ab" {
					ki = 1
				}
				if rng.IntN(100) < 55 {
					tokens := 0.0
					if rng.IntN(2) == 0 {
						tokens = float64(rng.IntN(3000))
					}
					maxWait := forever // most callers can wait; some have little time left
					if rng.IntN(3) == 0 {
						maxWait = time.Duration(rng.Int64N(int64(5 * time.Second))).Truncate(time.Microsecond)
					}
					got, err := procs[p].Reserve(ctx, key, tokens, maxWait)
					if err != nil {
						t.Fatalf("step %d: Reserve: %v", i, err)
					}
					want := model.reserve(key, tokens, micros(maxWait), us)
					if got != want {
						t.Fatalf("step %d: process %d reserved %v tokens of %s within %v:\n\tgot  %+v\n\twant %+v",
							i, p, tokens, key, maxWait, got, want)
					}
					if got.Wait >= maxWait {
						seen.refused++
					}
					marks[key] = append(marks[key], [2]pace.Mark{got.Requests, got.Tokens})
					seen.count(got)
					continue
				}
				if rng.IntN(8) == 0 {
					spec[ki][0] = rng.IntN(len(requestSpecs))
				}
				if rng.IntN(8) == 0 {
					spec[ki][1] = rng.IntN(len(tokenSpecs))
				}
				var rm, tm []pace.Mark
				for _, mk := range marks[key] {
					rm, tm = append(rm, mk[0]), append(tm, mk[1])
				}
				var r pace.Report
				if rng.IntN(6) > 0 {
					r.Requests = randomLimit(rng, requestSpecs[spec[ki][0]], rm)
				}
				if rng.IntN(2) == 0 {
					r.Tokens = randomLimit(rng, tokenSpecs[spec[ki][1]], tm)
				}
				if rng.IntN(5) == 0 {
					r.Block = time.Duration(rng.Int64N(int64(10 * time.Second)))
				}
				if err := procs[p].Learn(ctx, key, r); err != nil {
					t.Fatalf("step %d: Learn(%+v): %v", i, r, err)
				}
				model.learn(key, r, us)
			}
			// The walk must reach what the model has to say, or the
			// comparison proves little.
			if seen.waits == 0 || seen.corrected == 0 || seen.windows == 0 || seen.blocked == 0 || seen.refused == 0 {
				t.Errorf("the random walk missed a behaviour: %+v", seen)
			}
		})
	}
}

// coverage counts the grants that show each behaviour of the model.
type coverage struct{ waits, corrected, windows, blocked, refused int }

func (c *coverage) count(g pace.Grant) {
	if g.Wait > 0 {
		c.waits++
	}
	if g.Requests.Corrected > 0 || g.Tokens.Corrected > 0 {
		c.corrected++
	}
	if g.Requests.Epoch > 1 || g.Tokens.Epoch > 1 {
		c.windows++
	}
	if g.RetryAfter {
		c.blocked++
	}
}
