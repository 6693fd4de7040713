package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRequestHeadersAreBounded: a request whose headers pass 32 KiB gets
// 431; one under it is served.
func TestRequestHeadersAreBounded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), time.Minute)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	for size, want := range map[int]int{20 << 10: http.StatusOK, 40 << 10: http.StatusRequestHeaderFieldsTooLarge} {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
		req.Header.Set("X-Padding", strings.Repeat("a", size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%d bytes of headers: %v", size, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%d bytes of headers: status %d, want %d", size, resp.StatusCode, want)
		}
	}
}
