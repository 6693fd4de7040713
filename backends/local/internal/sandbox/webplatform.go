package sandbox

import (
	"context"

	"github.com/supolka/codemode-gateway/backends/local/internal/webplatform"
)

// The session is the web platform's event loop: fetch, timers behind
// AbortSignal.timeout and crypto run their work through these.

// Post runs fn on the loop goroutine.
func (s *session) Post(fn func()) { s.post(fn) }

// Context is the run's context, cancelled when the run ends.
func (s *session) Context() context.Context { return s.ctx }

// Stop ends the run with err's text.
func (s *session) Stop(err error) { s.stop(err) }

// HostWait brackets a wait on the caller's outbound function: while it is
// open (and nothing else runs) the run clock stops, as for a tool call.
// Called on the loop goroutine; so is the done function it returns.
func (s *session) HostWait() func() {
	s.open++
	return func() { s.open-- }
}

// GuestWork brackets the guest's own work done off the loop (a native
// request): while it is open the run clock runs, even beside a host call.
// Called on the loop goroutine; so is the done function it returns.
func (s *session) GuestWork() func() {
	s.elsewhere++
	return func() { s.elsewhere-- }
}

// OffLoop is work of the run's on the calling goroutine, off its loop: a
// host that meters what runs spend (a worker) charges it to the run.
func (s *session) OffLoop() func() {
	if m, ok := s.host.(Meter); ok {
		return m.OffLoop()
	}
	return func() {}
}

// prepareWebPlatform installs fetch and the rest of the web platform, with
// fetch left unconfigured until the job is known.
func (s *session) prepareWebPlatform() error {
	pl, err := webplatform.Prepare(s.vm, s)
	s.platform = pl
	return err
}

// configureWebPlatform gives fetch the job's outbound setting.
func (s *session) configureWebPlatform() {
	cfg := webplatform.Config{Mode: s.job.OutboundMode, Native: s.job.Native}
	if s.host != nil {
		cfg.Stub = s.host.Outbound
	}
	s.platform.Configure(cfg)
}
