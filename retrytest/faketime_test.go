package retrytest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/retrykit/retry/retrytest"
)

func TestFakeTimeStartsAtFixedInstant(t *testing.T) {
	want := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if got := retrytest.NewFakeTime().Clock.Now(); !got.Equal(want) {
		t.Errorf("clock starts at %v, want %v", got, want)
	}
}

func TestFakeTimeSleepRecordsAndAdvances(t *testing.T) {
	ft := retrytest.NewFakeTime()
	start := ft.Clock.Now()
	timer := ft.Clock.NewTimer(2 * time.Second) // fires only once the sleeps reach it
	defer timer.Stop()
	for _, d := range []time.Duration{time.Second, 1500 * time.Millisecond} {
		if err := ft.Sleep(t.Context(), d); err != nil {
			t.Fatalf("Sleep(%v) = %v", d, err)
		}
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 1500 * time.Millisecond}, ft.Sleeps()); diff != "" {
		t.Errorf("Sleeps (-want +got):\n%s", diff)
	}
	if got := ft.Slept(); got != 2500*time.Millisecond {
		t.Errorf("Slept = %v, want 2.5s", got)
	}
	if got := ft.Clock.Since(start); got != 2500*time.Millisecond {
		t.Errorf("clock moved %v, want 2.5s", got)
	}
	select {
	case <-timer.Chan():
	default:
		t.Error("a timer on the clock did not fire when the sleeps passed it")
	}
}

func TestFakeTimeSleepsReturnsCopy(t *testing.T) {
	ft := retrytest.NewFakeTime()
	_ = ft.Sleep(t.Context(), time.Second)
	ft.Sleeps()[0] = time.Hour
	if got := ft.Sleeps(); got[0] != time.Second {
		t.Errorf("Sleeps = %v after changing a returned copy, want [1s]", got)
	}
}

func TestFakeTimeSleepHonoursDoneContext(t *testing.T) {
	ft := retrytest.NewFakeTime()
	start := ft.Clock.Now()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := ft.Sleep(ctx, time.Second); err != context.Canceled {
		t.Errorf("Sleep = %v, want context.Canceled", err)
	}
	if got := ft.Sleeps(); len(got) != 0 {
		t.Errorf("Sleeps = %v, want none recorded", got)
	}
	if got := ft.Clock.Since(start); got != 0 {
		t.Errorf("clock moved %v, want not at all", got)
	}
}

func TestFakeTimeRand(t *testing.T) {
	ft := retrytest.NewFakeTime()
	var got []float64
	got = append(got, ft.Rand())
	ft.SetRand(func() float64 { return 0.25 })
	got = append(got, ft.Rand())
	ft.SetRand(nil)
	got = append(got, ft.Rand())
	if diff := cmp.Diff([]float64{1, 0.25, 1}, got); diff != "" {
		t.Errorf("Rand (-want +got):\n%s", diff)
	}
}

func TestFakeTimeConcurrentUse(t *testing.T) {
	ft := retrytest.NewFakeTime()
	start := ft.Clock.Now()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			ft.SetRand(func() float64 { return 0.5 })
			_ = ft.Rand()
			_ = ft.Sleep(t.Context(), time.Millisecond)
			_ = ft.Sleeps()
		})
	}
	wg.Wait()
	if n := len(ft.Sleeps()); n != 20 {
		t.Errorf("%d sleeps recorded, want 20", n)
	}
	if got := ft.Clock.Since(start); got != 20*time.Millisecond {
		t.Errorf("clock moved %v, want 20ms", got)
	}
}
