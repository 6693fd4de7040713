package main

import "testing"

// TestExecutorServerRefusesAShortOrMissingAdminToken: --admin-token-env
// names a variable that must hold a token of at least 16 bytes; the
// server does not start otherwise.
func TestExecutorServerRefusesAShortOrMissingAdminToken(t *testing.T) {
	t.Setenv("CODEMODE_TEST_SHORT_TOKEN", "short")
	for name, want := range map[string]string{
		"CODEMODE_TEST_UNSET_TOKEN": "gateway serve: --admin-token-env: environment variable CODEMODE_TEST_UNSET_TOKEN is not set; it must hold a token of at least 16 bytes; make one with `gateway hash-key --new`\n",
		"CODEMODE_TEST_SHORT_TOKEN": "gateway serve: --admin-token-env: environment variable CODEMODE_TEST_SHORT_TOKEN must hold a token of at least 16 bytes; make one with `gateway hash-key --new`\n",
	} {
		code, stdout, stderr := runCmd("serve", "--executor-server", "--admin-token-env", name)
		if code != 2 || stdout != "" || stderr != want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and %q", name, code, stdout, stderr, want)
		}
	}
}
