package sandbox

import (
	"context"
	"testing"

	"github.com/supolka/codemode-gateway/protocol"
)

// stubHost answers every stub-mode request with the URL it was sent.
type stubHost struct{ fakeHost }

func (h *stubHost) Outbound(ctx context.Context, req protocol.OutboundRequest) (protocol.OutboundResponse, error) {
	return protocol.OutboundResponse{Status: 200, Body: []byte("stub " + req.URL)}, nil
}

// A runtime prepared before its job takes the job's outbound setting, not
// one fixed when it was built: the same kind of Prepared runs a stub-mode
// job through the host and refuses fetch in a disabled one.
func TestPreparedTakesTheJobsOutboundSetting(t *testing.T) {
	stubbed, disabled := Prepare(), Prepare()
	code := `async () => { try { return await (await fetch('https://x/p')).text() } catch (e) { return e.message } }`

	j := job(code)
	j.OutboundMode = protocol.OutboundStub
	if got := result(t, envelope(t)(stubbed.Run(context.Background(), j, &stubHost{}))); got != "stub https://x/p" {
		t.Fatalf("stub mode: %v", got)
	}
	j.OutboundMode = protocol.OutboundDisabled
	if got := result(t, envelope(t)(disabled.Run(context.Background(), j, &stubHost{}))); got != protocol.NewOutboundDisabledError().Error() {
		t.Fatalf("disabled mode: %v", got)
	}
}

// A Prepared serves one run: a second use gets the internal-error text and
// never sees the first run's globals.
func TestPreparedServesOneRun(t *testing.T) {
	p := Prepare()
	if got := result(t, envelope(t)(p.Run(context.Background(), job(`async () => { globalThis.mark = 1; return 1 }`), &fakeHost{}))); got != float64(1) {
		t.Fatalf("first use: %v", got)
	}
	res, err := p.Run(context.Background(), job(`async () => typeof mark`), &fakeHost{})
	wantInternal(t, res, err)
	res, kept, err := p.RunRetained(context.Background(), job(`async () => 1`), &fakeHost{})
	if kept != nil {
		t.Fatal("a used-up Prepared retained a session")
	}
	wantInternal(t, res, err)
}

// A job refused before it runs (a bad provider name) uses its Prepared up
// as well, so that no runtime is handed to two jobs.
func TestPreparedIsUsedUpByARefusedJob(t *testing.T) {
	p := Prepare()
	j := job(`async () => 1`)
	j.Providers = []protocol.ProviderDescriptor{{Name: "not a name", Tools: []string{"x"}}}
	if res := envelope(t)(p.Run(context.Background(), j, &fakeHost{})); !res.HasError {
		t.Fatalf("refused job: %+v", res)
	}
	res, err := p.Run(context.Background(), job(`async () => 1`), &fakeHost{})
	wantInternal(t, res, err)
}
