// Package clientgoworkqueue measures client-go's work queue doing exactly the work that
// benches/workqueue.rs gives ours, so hack/bench/workqueue-vs-client-go.sh can print the two side
// by side. It is written the way a client-go controller uses the queue: a typed rate-limiting
// queue, worker goroutines looping Get -> Done (sample-controller's processNextWorkItem, with an
// empty reconcile), the producer on its own goroutine.
//
//	go test -run '^$' -bench . -benchtime 2s
//
// Scenarios (names match the Rust benchmark ids):
//
//   - AddGetDone/workers=W/keys=N: one queue and W workers for the whole benchmark; one iteration
//     adds N distinct keys from the benchmark goroutine and waits until the workers have called
//     Done on all of them (a WaitGroup, one Done per key).
//   - SingleThread/keys=N: the benchmark goroutine adds N keys, then gets and dones them all: the
//     queue's data structures alone, no waiting and no wake-ups.
//   - RateLimited/workers=1/keys=N: a fresh queue with DefaultTypedControllerRateLimiter per
//     iteration; AddRateLimited for N keys, then the fake clock steps past every deadline at once
//     and one worker loops Get -> Forget -> Done. The limiter makes keys wait up to 990 s of
//     (fake) time, so what is measured is CPU cost, not waiting. Queue construction and shutdown
//     are not timed.
//
// Each benchmark reports keys/s: keys processed per second of timed work.
package clientgoworkqueue

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
)

var (
	keyCounts    = []int{100, 10_000}
	workerCounts = []int{1, 2, 4, 8, 16}
)

// keys returns count distinct keys shaped like a controller's (namespace/name), over 100
// namespaces: the same keys the Rust benchmark uses.
func keys(count int) []string {
	keys := make([]string, count)
	for i := range keys {
		keys[i] = fmt.Sprintf("namespace-%d/database-%d", i%100, i)
	}
	return keys
}

func reportKeysPerSecond(b *testing.B, keys int, iterations int) {
	b.ReportMetric(float64(keys)*float64(iterations)/b.Elapsed().Seconds(), "keys/s")
}

// runWorker is a controller's worker: process items until the queue shuts down.
func runWorker(queue workqueue.TypedRateLimitingInterface[string], processed *sync.WaitGroup) {
	for processNextWorkItem(queue, processed) {
	}
}

func processNextWorkItem(queue workqueue.TypedRateLimitingInterface[string], processed *sync.WaitGroup) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	// The reconcile of key would run here.
	queue.Done(key)
	processed.Done()
	return true
}

func BenchmarkAddGetDone(b *testing.B) {
	for _, count := range keyCounts {
		keys := keys(count)
		for _, workers := range workerCounts {
			b.Run(fmt.Sprintf("workers=%d/keys=%d", workers, count), func(b *testing.B) {
				queue := workqueue.NewTypedRateLimitingQueueWithConfig(
					workqueue.DefaultTypedControllerRateLimiter[string](),
					workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench"},
				)
				var processed, running sync.WaitGroup
				for range workers {
					running.Go(func() { runWorker(queue, &processed) })
				}
				iterations := 0
				for b.Loop() {
					processed.Add(len(keys))
					for _, key := range keys {
						queue.Add(key)
					}
					processed.Wait()
					iterations++
				}
				reportKeysPerSecond(b, len(keys), iterations)
				queue.ShutDown()
				running.Wait()
			})
		}
	}
}

func BenchmarkSingleThread(b *testing.B) {
	for _, count := range keyCounts {
		keys := keys(count)
		b.Run(fmt.Sprintf("keys=%d", count), func(b *testing.B) {
			queue := workqueue.NewTypedRateLimitingQueueWithConfig(
				workqueue.DefaultTypedControllerRateLimiter[string](),
				workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench"},
			)
			defer queue.ShutDown()
			iterations := 0
			for b.Loop() {
				for _, key := range keys {
					queue.Add(key)
				}
				for range keys {
					key, _ := queue.Get()
					queue.Done(key)
				}
				iterations++
			}
			reportKeysPerSecond(b, len(keys), iterations)
		})
	}
}

// forgettingWorker gets count keys, each succeeding: Forget resets its backoff, then Done.
func forgettingWorker(queue workqueue.TypedRateLimitingInterface[string], count int) {
	for range count {
		key, shutdown := queue.Get()
		if shutdown {
			panic("the queue shut down while keys were due")
		}
		queue.Forget(key)
		queue.Done(key)
	}
}

func BenchmarkRateLimited(b *testing.B) {
	for _, count := range keyCounts {
		keys := keys(count)
		b.Run(fmt.Sprintf("workers=1/keys=%d", count), func(b *testing.B) {
			iterations := 0
			for b.Loop() {
				b.StopTimer()
				clock := testingclock.NewFakeClock(time.Now())
				queue := workqueue.NewTypedRateLimitingQueueWithConfig(
					workqueue.DefaultTypedControllerRateLimiter[string](),
					workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench", Clock: clock},
				)
				b.StartTimer()

				finished := make(chan struct{})
				go func() {
					defer close(finished)
					forgettingWorker(queue, len(keys))
				}()
				for _, key := range keys {
					queue.AddRateLimited(key)
				}
				// Past the last deadline: 10,000 keys at 10 per second after a burst of 100 is 990 s.
				clock.Step(time.Hour)
				<-finished

				b.StopTimer()
				queue.ShutDown()
				b.StartTimer()
				iterations++
			}
			reportKeysPerSecond(b, len(keys), iterations)
		})
	}
}
