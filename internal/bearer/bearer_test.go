package bearer

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// A stored hash is "sha256:" and the 64 hex digits of the digest, in
// either case; anything else is not one.
func TestParseKeyHash(t *testing.T) {
	sum := sha256.Sum256([]byte("a-key-for-this-test-0123456789"))
	hexSum := hex.EncodeToString(sum[:])
	for _, s := range []string{"sha256:" + hexSum, "sha256:" + strings.ToUpper(hexSum)} {
		if h, ok := ParseKeyHash(s); !ok || h != KeyHash(sum) {
			t.Errorf("ParseKeyHash(%q) = %x, %v; want the digest", s, h, ok)
		}
	}
	for _, s := range []string{
		hexSum, "sha512:" + hexSum, "SHA256:" + hexSum, "sha256:" + hexSum[:62],
		"sha256:" + hexSum + "00", "sha256:" + strings.Repeat("g", 64), "sha256:", "",
	} {
		if h, ok := ParseKeyHash(s); ok {
			t.Errorf("ParseKeyHash(%q) = %x, true; want it refused", s, h)
		}
	}
}
