package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestVersionPrintsTheBuildGoAndProtocolVersions(t *testing.T) {
	saved := version
	t.Cleanup(func() { version = saved })
	version = "v1.4.2-3-g1a2b3c4"
	want := "gateway v1.4.2-3-g1a2b3c4 (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ", executor protocol 1)\n"
	for _, arg := range []string{"version", "--version", "-version"} {
		if code, out, errOut := runCmd(arg); code != 0 || out != want || errOut != "" {
			t.Errorf("%s: exit %d, printed %q (stderr %q), want %q", arg, code, out, errOut, want)
		}
	}
}

func TestBuildVersion(t *testing.T) {
	installed := func(v string) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/supolka/codemode-gateway", Version: v}}
	}
	for _, c := range []struct {
		name string
		set  string
		info *debug.BuildInfo
		want string
	}{
		{"set at build time", "v0.3.0", installed("v0.2.0"), "v0.3.0"},
		{"git describe past a tag", "v0.3.0-4-gabcdef0-dirty", nil, "v0.3.0-4-gabcdef0-dirty"},
		{"go install of a release", "dev", installed("v0.2.1"), "v0.2.1"},
		{"go install of a release candidate", "dev", installed("v1.0.0-rc.2"), "v1.0.0-rc.2"},
		{"a pseudo-version is no release", "dev", installed("v0.0.0-20261203125755-313e4ee0a1b2"), "dev"},
		{"a dirty checkout is no release", "dev", installed("v0.2.1+dirty"), "dev"},
		{"go build in a checkout", "dev", installed("(devel)"), "dev"},
		{"no build information", "dev", nil, "dev"},
		{"an empty -X value", "", nil, "dev"},
	} {
		if got := buildVersion(c.set, c.info); got != c.want {
			t.Errorf("%s: buildVersion(%q, %v) = %q, want %q", c.name, c.set, c.info, got, c.want)
		}
	}
}
