package testutil

import (
	"sync"
	"time"
)

// SamplePeak calls sample every interval (and once at once) in a goroutine
// of its own and keeps the largest value it returned with ok set. The
// function it returns stops the sampling, waits for the goroutine, and
// returns that peak (0 when no sample was ok).
func SamplePeak(interval time.Duration, sample func() (v uint64, ok bool)) (stop func() uint64) {
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			if v, ok := sample(); ok && v > peak {
				peak = v
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() uint64 {
		once.Do(func() { close(done); wg.Wait() })
		return peak
	}
}
