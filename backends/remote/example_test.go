package remote_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/backends/remote"
	"github.com/supolka/codemode-gateway/capnweb"
	"github.com/supolka/codemode-gateway/protocol"
	"github.com/supolka/codemode-gateway/protocol/executorapi"
)

// exampleServer stands in for a gateway or `gateway serve
// --executor-server`: the local backend behind ExecutorApi on a loopback
// port. It returns the ws:// address and a function that stops it.
func exampleServer() (string, func()) {
	backend, err := local.New(local.Options{MaxWorkers: 1})
	if err != nil {
		log.Fatal(err)
	}
	api := executorapi.NewServer(backend, executorapi.ServerOptions{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sess, err := capnweb.Accept(w, r, api.Target(), executorapi.SessionOptions(capnweb.Options{})); err == nil {
			<-sess.Done()
		}
	}))
	stop := func() {
		hs.CloseClientConnections()
		hs.Close()
		api.Close()
		backend.Close()
	}
	return "ws" + strings.TrimPrefix(hs.URL, "http"), stop
}

// exampleExecutor is a remote.Executor dialled to a new exampleServer, and
// a function that closes both.
func exampleExecutor() (*remote.Executor, func()) {
	url, stopServer := exampleServer()
	ex, err := remote.Dial(context.Background(), url, remote.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return ex, func() {
		ex.Close()
		stopServer()
	}
}

// Dial connects (the handshake included) and runs one program. Against a
// gateway, the Authorization header carries the tenant's key.
func ExampleDial() {
	url, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	ex, err := remote.Dial(ctx, url, remote.Options{
		Header: http.Header{"Authorization": {"Bearer cmk_demo_local_only_never_deploy_this_key"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer ex.Close()

	res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: "async () => 6 * 7"})
	if err != nil {
		log.Fatal(err)
	}
	v, _ := res.Value()
	fmt.Println(v)
	// Output: 42
}

// Tool calls come back to the caller's dispatch; NewEnvelopeDispatch
// writes the envelopes, and a module and the console travel with the run.
func ExampleExecutor_Execute() {
	ex, stop := exampleExecutor()
	defer stop()
	ctx := context.Background()

	state := protocol.NewEnvelopeState()
	defer state.Complete()
	res, err := ex.Execute(ctx, &protocol.ExecuteRequest{
		Code: `import { shout } from 'text'
async () => {
  const name = await crm.lookup('c1')
  console.log('found', name)
  return shout(name)
}`,
		Providers: []protocol.ProviderDescriptor{{Name: "crm", Tools: []string{"lookup"}, PositionalArgs: true}},
		Dispatch: protocol.NewEnvelopeDispatch(state, func(_ context.Context, provider, tool string, args []any) (any, error) {
			return "ada", nil
		}),
		Modules:  protocol.ModuleMap{"text": {Kind: protocol.KindJS, Source: "export const shout = (s) => s.toUpperCase() + '!'"}},
		Timeout:  protocol.TimeoutOf(5000),
		Outbound: protocol.NoOutbound(),
	})
	if err != nil {
		log.Fatal(err)
	}
	v, _ := res.Value()
	fmt.Println(v, res.Logs)
	// Output: ADA! [{log found ada}]
}

// A program that returns a fetch handler under RetainHandles keeps its
// isolate; InvokeHandle reaches it until CloseHandles, then the typed
// HANDLES_CLOSED fault.
func ExampleExecutor_InvokeHandle() {
	ex, stop := exampleExecutor()
	defer stop()
	ctx := context.Background()

	grant, err := ex.Execute(ctx, &protocol.ExecuteRequest{
		Code:          "async () => { let n = 0; return { fetch: () => new Response(String(++n)) } }",
		RetainHandles: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		res, err := ex.InvokeHandle(ctx, grant.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.Status, string(res.Body))
	}
	if err := ex.CloseHandles(ctx, grant.ExecutionID); err != nil {
		log.Fatal(err)
	}
	_, err = ex.InvokeHandle(ctx, grant.ExecutionID, "fetch", protocol.OutboundRequest{Method: "GET", URL: "https://app.example/"})
	fmt.Println(protocol.CodeOf(err))
	// Output:
	// 200 1
	// 200 2
	// HANDLES_CLOSED
}
