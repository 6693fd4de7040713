package tsclient

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// requireBrowserEnv is the variable CI sets (.ci/run) so that the browser
// test never skips: with it at 1, finding no Chromium fails the test.
const requireBrowserEnv = "CODEMODE_REQUIRE_BROWSER"

// debianChromium is where Debian's chromium package installs the browser.
const debianChromium = "/usr/bin/chromium"

// npmChromium is the Chromium `make browser-deps` unpacks from the npm
// registry's @sparticuz/chromium on a Linux x64 machine without Debian's.
var npmChromium = filepath.Join("test", "browser", "chromium", "chromium")

// browserDecision is what the browser test does: drive Path, or, with no
// Chromium to drive, print Skip (one line) and skip, or fail with Err.
type browserDecision struct {
	Path string
	Skip string
	Err  error
}

// decideBrowser picks the Chromium the browser test drives: CHROMIUM when
// it is set (and nothing else then), else Debian's, else the one from the
// npm registry. isFile says whether a path names a file.
func decideBrowser(getenv func(string) string, isFile func(string) bool) browserDecision {
	var candidates []string
	if env := getenv("CHROMIUM"); env != "" {
		candidates = []string{env}
	} else {
		candidates = []string{debianChromium, npmChromium}
	}
	for _, c := range candidates {
		if isFile(c) {
			return browserDecision{Path: c}
		}
	}
	// why completes "browser test skipped: " and the failure alike.
	why := "no Chromium at " + debianChromium + " nor from `make browser-deps` (Linux x64 only); install Debian's chromium (apt-get install chromium) or set CHROMIUM to a Chromium binary"
	if env := getenv("CHROMIUM"); env != "" {
		why = "CHROMIUM=" + env + " is not a file; point it at a Chromium binary, or unset it and install Debian's chromium (apt-get install chromium)"
	}
	if getenv(requireBrowserEnv) == "1" {
		return browserDecision{Err: errors.New(requireBrowserEnv + "=1, and " + why)}
	}
	return browserDecision{Skip: "browser test skipped: " + why}
}

// isFile reports whether path names a file (after symbolic links).
func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestBrowserDecisionDrivesTheChromiumFound(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "chromium")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, require := range []string{"", "1"} {
		got := decideBrowser(envOf(map[string]string{"CHROMIUM": bin, requireBrowserEnv: require}), isFile)
		if got != (browserDecision{Path: bin}) {
			t.Fatalf("CHROMIUM=%s, %s=%q: got %+v, want that path driven", bin, requireBrowserEnv, require, got)
		}
	}
	// Without CHROMIUM: Debian's first, then the npm registry's.
	only := func(path string) func(string) bool { return func(p string) bool { return p == path } }
	if got := decideBrowser(envOf(nil), only(debianChromium)); got != (browserDecision{Path: debianChromium}) {
		t.Fatalf("with Debian's chromium: got %+v", got)
	}
	if got := decideBrowser(envOf(nil), only(npmChromium)); got != (browserDecision{Path: npmChromium}) {
		t.Fatalf("with the npm registry's chromium: got %+v", got)
	}
}

func TestBrowserDecisionSkipsWithOneLineUnlessRequired(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-chromium")
	got := decideBrowser(envOf(map[string]string{"CHROMIUM": missing}), isFile)
	want := "browser test skipped: CHROMIUM=" + missing + " is not a file; point it at a Chromium binary, or unset it and install Debian's chromium (apt-get install chromium)"
	if got != (browserDecision{Skip: want}) {
		t.Fatalf("CHROMIUM at a missing file: got %+v, want the skip line %q", got, want)
	}
	// A set CHROMIUM is the only candidate, even where Debian's exists.
	if got := decideBrowser(envOf(map[string]string{"CHROMIUM": missing}), func(p string) bool { return p != missing }); got != (browserDecision{Skip: want}) {
		t.Fatalf("CHROMIUM at a missing file beside other browsers: got %+v", got)
	}
	none := func(string) bool { return false }
	got = decideBrowser(envOf(nil), none)
	want = "browser test skipped: no Chromium at /usr/bin/chromium nor from `make browser-deps` (Linux x64 only); install Debian's chromium (apt-get install chromium) or set CHROMIUM to a Chromium binary"
	if got != (browserDecision{Skip: want}) {
		t.Fatalf("no Chromium: got %+v, want the skip line %q", got, want)
	}

	got = decideBrowser(envOf(map[string]string{requireBrowserEnv: "1"}), none)
	wantErr := "CODEMODE_REQUIRE_BROWSER=1, and no Chromium at /usr/bin/chromium nor from `make browser-deps` (Linux x64 only); install Debian's chromium (apt-get install chromium) or set CHROMIUM to a Chromium binary"
	if got.Path != "" || got.Skip != "" || got.Err == nil || got.Err.Error() != wantErr {
		t.Fatalf("no Chromium under %s=1: got %+v, want the failure %q", requireBrowserEnv, got, wantErr)
	}
}
