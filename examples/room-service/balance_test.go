package main

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// Turns come jittered within ±half the interval, never two at once, and
// once more at once when wake closes (the flip to draining).
func TestPaceJittersTurnsAndWakesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Second
		ctx, cancel := context.WithCancel(t.Context())
		wake := make(chan struct{})
		var (
			mu    sync.Mutex
			turns []time.Time
		)
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(turns)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			pace(ctx, interval, wake, func(context.Context) {
				mu.Lock()
				defer mu.Unlock()
				turns = append(turns, time.Now())
			})
		}()
		time.Sleep(100 * interval) // fake time: a hundred turns' worth
		synctest.Wait()
		before := count()
		close(wake)
		synctest.Wait()
		if got := count(); got != before+1 {
			t.Fatalf("turns at wake: got %d; want %d (one at once)", got-before, 1)
		}
		time.Sleep(10 * interval)
		cancel()
		<-done

		var short, long int
		for i := 1; i < before; i++ {
			gap := turns[i].Sub(turns[i-1])
			if gap < interval/2 || gap >= interval*3/2 {
				t.Fatalf("gap %d: got %s; want within [%s, %s)", i, gap, interval/2, interval*3/2)
			}
			if gap < interval*9/10 {
				short++
			}
			if gap > interval*11/10 {
				long++
			}
		}
		if before < 67 || before > 200 {
			t.Errorf("turns in 100 intervals: got %d; want about 100", before)
		}
		if short == 0 || long == 0 {
			t.Errorf("gaps shorter than 0.9 interval: %d, longer than 1.1: %d; want some of each (jitter)", short, long)
		}
	})
}

// Moves wait for settleTurns turns in a row that reached Redis, after a
// start and after every failed turn.
func TestSettledWaitsForTurnsInARow(t *testing.T) {
	tests := []struct {
		name string
		give []bool // whether each turn reached Redis
		want []bool
	}{
		{"after a start", []bool{true, true, true, true, true}, []bool{false, false, false, true, true}},
		{"after a fault", []bool{true, true, true, true, false, true, true, true, true}, []bool{false, false, false, true, false, false, false, false, true}},
		{"never while failing", []bool{false, false, false, false}, []bool{false, false, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &balancer{}
			for i, reached := range tt.give {
				if got := b.settled(reached); got != tt.want[i] {
					t.Fatalf("turn %d (reached %v): got %v; want %v", i, reached, got, tt.want[i])
				}
			}
		})
	}
}
