package retry

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// keptCap is the memory rb holds for kept bytes.
func keptCap(rb *replayBody) int {
	n := 0
	for _, c := range rb.chunks {
		n += cap(c)
	}
	return n
}

func TestReplayBodyKeepsOnlyWhatWasRead(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	tests := []struct {
		name    string
		known   bool
		read    int   // bytes the first attempt reads
		limit   int64 // ReplayBuffer
		wantMin int   // bounds of the memory kept
		wantMax int
		over    bool
	}{
		{name: "half of an unknown length", read: size / 2, limit: 4 << 20,
			wantMin: size / 2, wantMax: size/2 + size/16 + minReplayChunk},
		{name: "all of an unknown length", read: size, limit: 4 << 20,
			wantMin: size, wantMax: size + size/8 + minReplayChunk},
		{name: "all of a known length", known: true, read: size, limit: 4 << 20,
			wantMin: size, wantMax: size},
		{name: "half of a known length", known: true, read: size / 2, limit: 4 << 20,
			wantMin: size / 2, wantMax: size/2 + size/8 + minReplayChunk},
		{name: "never past the limit", read: size, limit: size,
			wantMin: size, wantMax: size},
		{name: "past the limit drops all", read: size, limit: size - 1, over: true},
		{name: "nothing read, nothing kept", read: 0, limit: 4 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(i % 253)
			}
			req, _ := http.NewRequest(http.MethodPut, "http://example.test/", io.NopCloser(bytes.NewReader(data)))
			req.ContentLength = -1
			if tt.known {
				req.ContentLength = size
			}
			rb := newReplay(req, tt.limit)
			v := rb.start()
			buf := make([]byte, 32<<10) // io.Copy's size
			for n := 0; n < tt.read; {
				k, err := v.Read(buf[:min(len(buf), tt.read-n)])
				n += k
				if err != nil {
					t.Fatalf("read %d bytes: %v", n, err)
				}
			}
			if got := keptCap(rb); got < tt.wantMin || got > tt.wantMax {
				t.Errorf("%d bytes held, want within [%d, %d]", got, tt.wantMin, tt.wantMax)
			}
			if rb.over.Load() != tt.over || rb.replayable() == tt.over {
				t.Errorf("over = %v, replayable = %v; want over %v", rb.over.Load(), rb.replayable(), tt.over)
			}
			next, err := rb.next()
			if tt.over {
				if err == nil {
					t.Error("next after the limit: no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(next)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("next attempt read %d bytes (err %v), want the %d of the body", len(got), err, size)
			}
			if _, err := v.Read(buf); err != errReplaySuperseded {
				t.Errorf("the retired view read: %v, want errReplaySuperseded", err)
			}
		})
	}
}
