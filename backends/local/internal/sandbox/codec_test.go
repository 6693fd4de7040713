package sandbox

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

type vector struct {
	Name     string `json:"name"`
	JS       string `json:"js"`
	JSON     string `json:"json"`
	Reparsed string `json:"reparsed"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "protocol", "testdata", "dispatch-vectors.json"))
	if err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) == 0 {
		t.Fatal("no vectors")
	}
	return vs
}

// The entry scope's JavaScript codec writes the same bytes as the Go codec
// on the shared vectors, and reads them back the same way. The comparison
// runs inside the runtime, so no string conversion stands between them.
func TestCodecMatchesSharedVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			reparsed := v.Reparsed
			if reparsed == "" {
				reparsed = v.JSON
			}
			code := `async () => {
  const value = (` + v.JS + `)
  const want = ` + strconv.Quote(v.JSON) + `
  const wantReparsed = ` + strconv.Quote(reparsed) + `
  const got = __stringifyForDispatch(value)
  const again = __stringifyForDispatch(__parseForDispatch(want))
  return [got === want, again === wantReparsed, escape(String(got)), escape(again)]
}`
			got := result(t, runJob(t, job(code), nil)).([]any)
			if got[0] != true {
				t.Errorf("stringify = %s, want %q", got[2], v.JSON)
			}
			if got[1] != true {
				t.Errorf("stringify(parse(json)) = %s, want %q", got[3], reparsed)
			}
		})
	}
}

// The Go codec reads what the JavaScript codec writes for a run's result.
func TestResultJSONReadsWithGoCodec(t *testing.T) {
	r := runJob(t, job(`async () => ({ bytes: new Uint8Array([1, 2, 3, 255]), view: new Uint16Array([1, 2]), n: -0, s: 'é' })`), nil)
	v, err := protocol.ParseForDispatch(r.ResultJSON)
	if err != nil {
		t.Fatalf("%q: %v", r.ResultJSON, err)
	}
	m := v.(map[string]any)
	if string(m["bytes"].([]byte)) != "\x01\x02\x03\xff" || string(m["view"].([]byte)) != "\x01\x00\x02\x00" || m["n"] != 0.0 || m["s"] != "é" {
		t.Fatalf("decoded %#v", m)
	}
}

func TestBase64Parts(t *testing.T) {
	got := result(t, runJob(t, job(`async () => {
    const out = [__encodeBase64(new Uint8Array([])), __encodeBase64(new Uint8Array([1, 2, 3, 255]))]
    out.push(Array.from(__decodeBase64('AQID/w==')), Array.from(__decodeBase64('AQID/w')))
    for (const bad of ['A', 'AQ==x', 'A Q==', '****']) {
      try { __decodeBase64(bad); out.push('accepted ' + bad) } catch (e) { out.push(e instanceof TypeError) }
    }
    out.push(__encodeBinaryValue('text') === undefined, __decodeBinaryValue(5))
    return out
  }`), nil))
	want := []any{"", "AQID/w==", []any{1.0, 2.0, 3.0, 255.0}, []any{1.0, 2.0, 3.0, 255.0}, true, true, true, true, true, 5.0}
	if b, _ := json.Marshal(got); string(b) != mustJSON(want) {
		t.Fatalf("got %s, want %s", b, mustJSON(want))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
