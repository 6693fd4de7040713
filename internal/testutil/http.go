// Package testutil holds helpers the tests of several packages share, so
// each is written once.
package testutil

import (
	"io"
	"net/http"
	"testing"
)

// Get GETs url and returns the status and the body, failing t when the
// request cannot be made.
func Get(t testing.TB, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
