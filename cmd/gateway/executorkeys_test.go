package main

import (
	"testing"
)

// A malformed --key-hash stops the executor server before it starts
// anything, naming the flag's place and what a hash looks like.
func TestExecutorServerRefusesAMalformedKeyHash(t *testing.T) {
	const good = "sha256:46e64bb8073f1820bfd1418553e3694e3967b060f73b1a6aa8fbace39a7d54fb"
	for hash, want := range map[string]string{
		"sha256:abcd": "gateway serve: auth: API key \"key-2\": the hash must be \"sha256:\" followed by 64 hex digits\n",
		"md5:abcd":    "gateway serve: auth: API key \"key-2\": the hash must start with \"sha256:\" (make one with `gateway hash-key`)\n",
	} {
		code, _, errOut := runCmd("serve", "--executor-server", "--listen", "127.0.0.1:0", "--key-hash", good, "--key-hash", hash)
		if code != 2 || errOut != want {
			t.Errorf("--key-hash %s: %d %q, want 2 %q", hash, code, errOut, want)
		}
	}
	code, _, errOut := runCmd("serve", "--executor-server", "--listen", "127.0.0.1:0", "--key-hash", good, "--key-hash", good)
	if want := "gateway serve: auth: API keys \"key-1\" and \"key-2\" have the same hash\n"; code != 2 || errOut != want {
		t.Errorf("the same --key-hash twice: %d %q, want 2 %q", code, errOut, want)
	}
}
