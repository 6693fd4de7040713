package e2e

import "testing"

// TestHandlesLifetimeFromJavaScript runs lifetime.test.mjs: the real
// capnweb client reads extensions() through the gateway and lends a
// handlesLifetime function that is released when the handles close, on the
// local backend and across a remote group.
func TestHandlesLifetimeFromJavaScript(t *testing.T) {
	nodeModules(t)
	startTwoTenants(t).runJS(t, "lifetime.test.mjs")
}
