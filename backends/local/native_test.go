package local

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/supolka/codemode-gateway/backends/local/internal/webplatform"
	"github.com/supolka/codemode-gateway/protocol"
)

// TestNativeOptionsReachTheWorker: the operator's native-fetch settings
// travel with each job into the worker: an allowed range is reached, the
// default deny list holds otherwise, and the veto means no network at all.
func TestNativeOptionsReachTheWorker(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "inside") }))
	defer srv.Close()
	code := fmt.Sprintf("async () => { try { return await (await fetch(%q)).text() } catch (e) { return e.name + ': ' + e.message } }", srv.URL)
	for _, c := range []struct {
		name   string
		native NativeOptions
		want   func(string) bool
	}{
		{"allowed", NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, func(s string) bool { return s == `"inside"` }},
		{"denied by default", NativeOptions{}, func(s string) bool { return s != `"inside"` && len(s) > len(`"TypeError: "`) }},
		{"vetoed", NativeOptions{Vetoed: true, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
			func(s string) bool { return s == `"TypeError: `+protocol.NewOutboundDisabledError().Error()+`"` }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex, err := New(Options{PoolSize: 1, Native: c.native})
			if err != nil {
				t.Fatal(err)
			}
			defer ex.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := ex.Execute(ctx, &protocol.ExecuteRequest{Code: code})
			if err != nil || res.HasError || !c.want(res.ResultJSON) {
				t.Fatalf("got %+v, %v", res, err)
			}
		})
	}
}

// TestRequestDenyBindsInsideTheAllowList: a request's own denied ranges
// hold even where the executor's allow list would let the address through.
func TestRequestDenyBindsInsideTheAllowList(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "inside") }))
	defer srv.Close()
	ex, err := New(Options{PoolSize: 1, Native: NativeOptions{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := fmt.Sprintf("async () => { try { return await (await fetch(%q)).text() } catch (e) { return 'refused' } }", srv.URL)
	for _, c := range []struct {
		deny []netip.Prefix
		want string
	}{
		{nil, `"inside"`},
		{[]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, `"refused"`},
	} {
		res, err := ex.ExecuteWith(ctx, &protocol.ExecuteRequest{Code: code}, protocol.Policy{NativeDeny: c.deny})
		if err != nil || res.ResultJSON != c.want {
			t.Fatalf("deny %v: %+v, %v; want %s", c.deny, res, err, c.want)
		}
	}
}

// TestNativeOptionsForJob: every operator setting reaches the job, a
// request's denied ranges go where the allow list cannot carve them out,
// and the defaults the zero value takes are the ones NativeOptions names.
func TestNativeOptionsForJob(t *testing.T) {
	o := NativeOptions{Vetoed: true, Deny: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, MaxResponseBytes: 1, MaxRedirects: 2, RequestTimeout: 3}
	deny := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	want := webplatform.NativeOptions{Vetoed: true, Deny: o.Deny, DenyAlways: deny, Allow: o.Allow,
		MaxResponseBytes: 1, MaxRedirects: 2, RequestTimeout: 3}
	if got := o.forJob(deny); !reflect.DeepEqual(got, want) {
		t.Fatalf("forJob = %+v, want %+v", got, want)
	}
	if webplatform.DefaultMaxResponseBytes != 8<<20 || webplatform.DefaultMaxRedirects != 20 || webplatform.DefaultRequestTimeout != 30*time.Second {
		t.Fatal("the web platform's native defaults moved; NativeOptions' comments name the old ones")
	}
}

// TestNativeOfGivesEachTenantItsSettings: with NativeOf each tenant's runs
// fetch under its own settings, and the pool's veto binds them all.
func TestNativeOfGivesEachTenantItsSettings(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "inside") }))
	defer srv.Close()
	code := fmt.Sprintf("async () => { try { return await (await fetch(%q)).text() } catch (e) { return e.name + ': ' + e.message } }", srv.URL)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	of := func(tenant string) NativeOptions {
		if tenant == "open" {
			return NativeOptions{Allow: loopback}
		}
		return NativeOptions{Vetoed: true}
	}
	vetoed := `"TypeError: ` + protocol.NewOutboundDisabledError().Error() + `"`
	for _, c := range []struct {
		name   string
		pool   NativeOptions
		tenant string
		want   string
	}{
		{"allowed tenant", NativeOptions{}, "open", `"inside"`},
		{"vetoed tenant", NativeOptions{Allow: loopback}, "shut", vetoed},
		{"allowed tenant on a vetoed pool", NativeOptions{Vetoed: true}, "open", vetoed},
	} {
		t.Run(c.name, func(t *testing.T) {
			ex, err := New(Options{PoolSize: 1, Native: c.pool, NativeOf: of})
			if err != nil {
				t.Fatal(err)
			}
			defer ex.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := ex.ExecuteWith(ctx, &protocol.ExecuteRequest{Code: code}, protocol.Policy{Tenant: c.tenant})
			if err != nil || res.HasError || res.ResultJSON != c.want {
				t.Fatalf("got %+v, %v; want %s", res, err, c.want)
			}
		})
	}
}
