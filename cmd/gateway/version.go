package main

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"

	"github.com/supolka/codemode-gateway/protocol"
)

// version is the release this binary was built from, set at build time with
// -ldflags "-X main.version=v1.2.3": make takes it from `git describe` of the
// latest v* tag, and leaves "dev" where there is none.
var version = "dev"

// releaseVersion matches a release's semantic version as `go install
// …@v1.2.3` records it: no pseudo-version (a commit's timestamp and hash)
// and no +dirty.
var releaseVersion = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(alpha|beta|rc)(\.[0-9]+)?)?$`)

// buildVersion is the version `gateway version` prints: the one set at
// build time, else the module's release version when the binary was
// installed with `go install`, else "dev".
func buildVersion(set string, info *debug.BuildInfo) string {
	if set != "dev" && set != "" {
		return set
	}
	if info != nil && releaseVersion.MatchString(info.Main.Version) {
		return info.Main.Version
	}
	return "dev"
}

// versionLine is what `gateway version` prints: the build's version, the
// Go release and platform it was built for, and the executor protocol
// version it speaks.
func versionLine() string {
	info, _ := debug.ReadBuildInfo()
	return fmt.Sprintf("gateway %s (%s %s/%s, executor protocol %d)\n",
		buildVersion(version, info), runtime.Version(), runtime.GOOS, runtime.GOARCH, protocol.ProtocolVersion)
}
