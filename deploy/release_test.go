package deploy

import (
	"bufio"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// elfMachines are the architectures `make release` builds for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// TestReleaseArtifacts checks the dist/ directory `make release-test`
// made: one static binary per platform, built without cgo (the one for this
// machine's platform run to print the release's version), LICENSE and
// NOTICE, and SHA256SUMS naming each with its digest.
func TestReleaseArtifacts(t *testing.T) {
	dist := os.Getenv("DIST")
	if dist == "" {
		t.Skip("DIST is not set: `make release-test` builds the release and runs this test on it")
	}
	version, platforms := os.Getenv("RELEASE_VERSION"), strings.Fields(os.Getenv("RELEASE_PLATFORMS"))
	if version == "" || len(platforms) == 0 {
		t.Fatal("make release-test sets RELEASE_VERSION and RELEASE_PLATFORMS with DIST")
	}

	want := []string{"LICENSE", "NOTICE", "SHA256SUMS"}
	for _, p := range platforms {
		want = append(want, "gateway_"+version+"_"+strings.ReplaceAll(p, "/", "_"))
	}
	slices.Sort(want)
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds %q, want %q", dist, got, want)
	}

	sums, err := os.Open(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer sums.Close()
	var summed []string
	for sc := bufio.NewScanner(sums); sc.Scan(); {
		digest, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(dist, name))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != digest {
			t.Errorf("SHA256SUMS says %s for %s; it is %x", digest, name, sum)
		}
		summed = append(summed, name)
	}
	slices.Sort(summed)
	if wantSummed := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return n == "SHA256SUMS" }); !slices.Equal(summed, wantSummed) {
		t.Errorf("SHA256SUMS names %q, want %q", summed, wantSummed)
	}

	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		bin := filepath.Join(dist, "gateway_"+version+"_"+goos+"_"+goarch)
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		if settings["GOOS"] != goos || settings["GOARCH"] != goarch || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
			t.Errorf("%s was built with %v; want GOOS=%s GOARCH=%s CGO_ENABLED=0 -trimpath", bin, settings, goos, goarch)
		}
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		if f.Machine != elfMachines[goarch] {
			t.Errorf("%s is for %v, want %v", bin, f.Machine, elfMachines[goarch])
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				t.Errorf("%s asks for a dynamic loader: it must be static", bin)
			}
		}
		f.Close()
		// The version set with -ldflags (which -trimpath leaves out of the
		// build information) shows when the binary runs.
		if goos == runtime.GOOS && goarch == runtime.GOARCH {
			out, err := exec.Command(bin, "version").Output()
			if line := "gateway " + version + " (" + info.GoVersion + " " + p + ", executor protocol 1)\n"; err != nil || string(out) != line {
				t.Errorf("%s version: %q (%v), want %q", bin, out, err, line)
			}
		}
	}
}
