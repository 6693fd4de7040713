//go:build !race

package sandbox

// raceBuild: this test binary has the race detector.
const raceBuild = false
