//go:build cgo || js

package webgpu

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMapReadStress runs many write/read (map) cycles while other goroutines
// allocate Go memory (forcing GCs) and create and free device buffers: the
// binding's own MapAsync crashes under exactly this load. -short keeps it
// quick enough for -race.
func TestMapReadStress(t *testing.T) {
	d := open(t)
	cycles := 3000
	if testing.Short() || raceEnabled {
		cycles = 400
	}
	b := mustBuf(t, d, 256)
	defer b.Release()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churn atomic.Int64
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var keep [][]byte
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				keep = append(keep, make([]byte, 4096+i%512))
				if len(keep) > 64 {
					keep = keep[:0]
					runtime.GC()
				}
				if i%16 == 0 {
					nb, err := d.NewBuffer(int64(64 + i%1024))
					if err == nil {
						nb.Release()
						churn.Add(1)
					}
				}
			}
		}()
	}
	buf := make([]byte, 256)
	got := make([]byte, 256)
	for i := 0; i < cycles; i++ {
		for j := 0; j < len(buf); j += 4 {
			binary.LittleEndian.PutUint32(buf[j:], uint32(i*1000+j))
		}
		if err := d.Write(b, 0, buf); err != nil {
			t.Fatal(err)
		}
		if err := d.Read(b, 0, got); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		for j := 0; j < len(got); j += 4 {
			if v := binary.LittleEndian.Uint32(got[j:]); v != uint32(i*1000+j) {
				t.Fatalf("cycle %d word %d: %d", i, j/4, v)
			}
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d cycles, %d buffers churned", cycles, churn.Load())
}
