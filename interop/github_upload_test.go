package interop_test

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v84/github"
)

// TestGitHubReleaseAssetUpload: go-github uploads a release asset from an
// *os.File, which net/http cannot rewind (no GetBody), by an unkeyed POST.
// A rate limit proves the upload was not taken, so with ReplayBuffer the
// whole file is sent again; without it, or after a failure that may have
// been processed, it is sent once.
func TestGitHubReleaseAssetUpload(t *testing.T) {
	t.Parallel()
	data := make([]byte, 1<<20)
	_, _ = rand.NewChaCha8([32]byte{7}).Read(data)
	path := filepath.Join(t.TempDir(), "asset.bin")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	limited := status(403, secondaryLimitBody, "Retry-After", "2")
	tests := []struct {
		name       string
		buffer     int64
		fault      fault
		wantSends  int
		wantSleeps []time.Duration
		wantErr    func(error) bool // nil: the asset is stored
	}{
		{name: "rate limited, ReplayBuffer", buffer: 2 << 20, fault: limited,
			wantSends: 2, wantSleeps: []time.Duration{2 * time.Second}},
		{name: "rate limited, no ReplayBuffer", fault: limited, wantSends: 1, wantErr: isAbuseError},
		{name: "rate limited, ReplayBuffer too short", buffer: 512 << 10, fault: limited, wantSends: 1, wantErr: isAbuseError},
		// An unkeyed POST that may have been processed is sent once,
		// whatever the buffer holds.
		{name: "502, ReplayBuffer", buffer: 2 << 20, fault: status(502, `{"message":"Server Error"}`),
			wantSends: 1, wantErr: isStatus(502)},
		{name: "reset mid-upload, ReplayBuffer", buffer: 2 << 20, fault: fault{ResetAt: 256 << 10},
			wantSends: 1, wantErr: func(err error) bool { return err != nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			isUpload := func(r *http.Request) bool { return r.Method == http.MethodPost }
			e := newGitHubEnv(t, overHTTP, isUpload, func(time.Time) []fault { return []fault{tt.fault} })
			e.r.ReplayBuffer = tt.buffer
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			asset, _, err := e.client.Repositories.UploadReleaseAsset(t.Context(), "octo", "hello", 1,
				&github.UploadOptions{Name: "asset.bin"}, f)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("UploadReleaseAsset: %v", err)
			case tt.wantErr == nil && asset.GetSize() != len(data):
				t.Errorf("asset size %d, want %d", asset.GetSize(), len(data))
			case tt.wantErr != nil && !tt.wantErr(err):
				t.Fatalf("UploadReleaseAsset error = %v, not the one wanted", err)
			}
			got := e.proxy.Received()
			if len(got) != tt.wantSends {
				t.Errorf("server saw %d sends (%v), want %d", len(got), faults(got), tt.wantSends)
			}
			for i, g := range got {
				if g.Complete && !bytes.Equal(g.Body, data) {
					t.Errorf("send %d: a full body of %d bytes that differs from the file", i+1, len(g.Body))
				}
			}
			if diff := cmp.Diff(tt.wantSleeps, e.r.ft.Sleeps()); diff != "" {
				t.Errorf("sleeps (-want +got):\n%s", diff)
			}
			e.fake.mu.Lock()
			assets := e.fake.assets
			e.fake.mu.Unlock()
			wantAssets := 0
			if tt.wantErr == nil {
				wantAssets = 1
			}
			if len(assets) != wantAssets || (wantAssets == 1 && !bytes.Equal(assets[0], data)) {
				t.Errorf("the fake stored %d assets, want %d holding the file", len(assets), wantAssets)
			}
		})
	}
}
