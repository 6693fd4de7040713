package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/supolka/codemode-gateway/gateway/config"
	"github.com/supolka/codemode-gateway/internal/telemetry"
)

// startTracing starts the tracer provider the configuration asks for; nil
// (no spans, no cost) when tracing is off.
func startTracing(c config.Tracing, version string, logger *slog.Logger) (*telemetry.Tracing, error) {
	s := telemetry.Settings{Enabled: c.Enabled, Protocol: c.Protocol, Endpoint: c.Endpoint, SampleRatio: c.SampleRatio,
		ServiceName: c.ServiceName, Version: version, RecordDigests: c.RecordDigests, Logger: logger}
	if len(c.Headers) > 0 {
		s.Headers = map[string]string{}
		for _, h := range c.Headers {
			s.Headers[h.Name] = h.Value
		}
	}
	return telemetry.Start(s)
}

// stopTracing exports the spans still buffered, for at most five seconds.
func (g *Gateway) stopTracing() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return g.tracing.Shutdown(ctx)
}

// millis is a duration as the logs write it: milliseconds.
func millis(d time.Duration) float64 { return telemetry.Ms(d) }
