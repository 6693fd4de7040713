//go:build !race

package local

// raceBuild: this test binary has the race detector.
const raceBuild = false
