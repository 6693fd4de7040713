package deploy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/gateway"
	"github.com/supolka/codemode-gateway/gateway/config"
	backendkinds "github.com/supolka/codemode-gateway/gateway/kinds"
)

func TestMain(m *testing.M) {
	local.RunWorkerIfRequested() // the base's local group re-executes this binary
	os.Exit(m.Run())
}

func renderOnDisk(t *testing.T, dir string) *manifests {
	t.Helper()
	m, err := render(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m
}

func kinds(m *manifests) []string {
	var ks []string
	for _, o := range m.objects {
		name := o.Metadata.Name
		if o.Kind == "ConfigMap" { // the generator appends a hash of the content
			name, _, _ = strings.Cut(name, "-")
			name += "-…"
		}
		ks = append(ks, o.Kind+"/"+name)
	}
	slices.Sort(ks)
	return ks
}

func TestBaseManifestsMatchTheirConfiguration(t *testing.T) {
	m := renderOnDisk(t, "kubernetes/base")
	want := []string{"ConfigMap/codemode-…", "Deployment/codemode-gateway", "NetworkPolicy/codemode-gateway", "NetworkPolicy/default-deny-ingress",
		"PodDisruptionBudget/codemode-gateway", "Secret/codemode-gateway-admin", "Service/codemode-gateway"}
	if got := kinds(m); !slices.Equal(got, want) {
		t.Fatalf("the base renders %v, want %v", got, want)
	}
	cfg, problems := checkGateway(m)
	if len(problems) > 0 {
		t.Fatalf("the base's manifests disagree with their configuration:\n%s", strings.Join(problems, "\n"))
	}
	if len(cfg.Backends) != 1 || cfg.Backends[0].Type != "local" {
		t.Fatalf("the base's configuration has backends %+v, want its one local group", cfg.Backends)
	}
}

func TestRemoteGroupOverlayMatchesItsExecutors(t *testing.T) {
	m := renderOnDisk(t, "kubernetes/overlays/remote-group")
	want := []string{"ConfigMap/codemode-…", "Deployment/codemode-gateway", "HorizontalPodAutoscaler/codemode-executor",
		"NetworkPolicy/codemode-executor", "NetworkPolicy/codemode-gateway", "NetworkPolicy/default-deny-ingress", "PodDisruptionBudget/codemode-executor", "PodDisruptionBudget/codemode-gateway",
		"Secret/codemode-gateway-admin", "Service/codemode-executor", "Service/codemode-gateway", "StatefulSet/codemode-executor"}
	if got := kinds(m); !slices.Equal(got, want) {
		t.Fatalf("the overlay renders %v, want %v", got, want)
	}
	cfg, problems := checkGateway(m)
	if len(problems) > 0 {
		t.Fatalf("the overlay's manifests disagree with their configuration:\n%s", strings.Join(problems, "\n"))
	}
	var remote []string
	for _, b := range cfg.Backends {
		if b.Type == "remote" {
			remote = append(remote, b.Name)
		}
	}
	if !slices.Equal(remote, []string{"pool"}) || cfg.Tenants[0].Backend != "pool" {
		t.Fatalf("the overlay's remote groups are %v and tenant %s runs on %s; want tenant app on the remote group pool", remote, cfg.Tenants[0].Name, cfg.Tenants[0].Backend)
	}
	var dep workloadSpec
	if err := m.spec("Deployment", "codemode-gateway", &dep); err != nil {
		t.Fatal(err)
	}
	var sts workloadSpec
	if err := m.spec("StatefulSet", "codemode-executor", &sts); err != nil {
		t.Fatal(err)
	}
	if g, e := dep.Template.Spec.Containers[0].Image, sts.Template.Spec.Containers[0].Image; g != e || g != "localhost/codemode-gateway:dev" {
		t.Fatalf("the gateway runs image %s and the executors %s: want the one image localhost/codemode-gateway:dev", g, e)
	}
}

// The checks above would pass on manifests that check nothing: each
// breakage here, made to a copy of the files, must be named.
func TestManifestChecksCatchEachMismatch(t *testing.T) {
	for _, c := range []struct {
		name, dir, file, old, new string
		want                      []string
	}{
		{
			"grace period not above the drain", "base", "base/gateway-deployment.yaml",
			"terminationGracePeriodSeconds: 75", "terminationGracePeriodSeconds: 70",
			[]string{"Deployment codemode-gateway: terminationGracePeriodSeconds must be above the preStop sleep (5s), drainTimeout (1m0s) and the 5s the listeners take to close after it"},
		},
		{
			"no pause before the drain", "base", "base/gateway-deployment.yaml",
			"lifecycle:\n            preStop:\n              sleep:\n                seconds: 5\n          ", "",
			[]string{"Deployment codemode-gateway: give the gateway a preStop sleep, so that it accepts until its endpoints are gone"},
		},
		{
			"readiness on the wrong path", "base", "base/gateway-deployment.yaml",
			"path: /readyz", "path: /ready",
			[]string{"Deployment codemode-gateway: readinessProbe asks /ready; the admin listener answers /readyz"},
		},
		{
			"admin listener moved in the configuration only", "base", "base/gateway.yaml",
			"listen: 0.0.0.0:9090", "listen: 0.0.0.0:9091",
			[]string{"Deployment codemode-gateway: container port admin is 9090, but admin.listen is 0.0.0.0:9091"},
		},
		{
			"gateway on loopback", "base", "base/gateway.yaml",
			"listen: 0.0.0.0:8080", "listen: 127.0.0.1:8080",
			[]string{"Deployment codemode-gateway: listen 127.0.0.1:8080 is loopback: neither probes nor Services reach it"},
		},
		{
			"id key from a literal value", "base", "base/gateway-deployment.yaml",
			"valueFrom:\n                secretKeyRef:\n                  name: codemode-gateway\n                  key: id-key", `value: "0123456789abcdef0123456789abcdef"`,
			[]string{"the mounted configuration: /etc/codemode/gateway.yaml:29: executionIds.keyEnv: environment variable GATEWAY_ID_KEY is not set; it must hold a key of at least 32 bytes, the same on every replica"},
		},
		{
			"worker processes past the memory limit", "base", "base/gateway.yaml",
			"maxWorkers: 4", "maxWorkers: 6",
			[]string{"Deployment codemode-gateway: container gateway's memory limit 3072Mi is below its worker processes at their bound and itself (3712Mi)"},
		},
		{
			"a writable root file system", "base", "base/gateway-deployment.yaml",
			"readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false",
			[]string{"Deployment codemode-gateway: container gateway must have a read-only root file system"},
		},
		{
			"discover names another Service", "overlays/remote-group", "overlays/remote-group/gateway.yaml",
			"dns: codemode-executor,", "dns: codemode-executors,",
			[]string{"backends pool discovers codemode-executors; the StatefulSet's headless Service is codemode-executor"},
		},
		{
			"discover on another port", "overlays/remote-group", "overlays/remote-group/gateway.yaml",
			"port: 8787,", "port: 8788,",
			[]string{"backends pool discovers ws://…:8788/; the executor servers serve ws://…:8787/"},
		},
		{
			"a members list under the autoscaler", "overlays/remote-group", "overlays/remote-group/gateway.yaml",
			"discover: {dns: codemode-executor, port: 8787, path: /, keyEnv: EXECUTOR_KEY, interval: 10s}",
			`members: [{url: "ws://codemode-executor-0.codemode-executor:8787/", keyEnv: EXECUTOR_KEY}, {url: "ws://codemode-executor-1.codemode-executor:8787/", keyEnv: EXECUTOR_KEY}]`,
			[]string{"backends pool lists its members, which cannot follow the HorizontalPodAutoscaler codemode-executor; find them with discover"},
		},
		{
			"not-ready members published", "overlays/remote-group", "executor/executor-service.yaml",
			"publishNotReadyAddresses: false", "publishNotReadyAddresses: true",
			[]string{"Service codemode-executor publishes pods that are not ready: a draining member would stay in the gateways' groups"},
		},
		{
			"replicas fought over with the autoscaler", "overlays/remote-group", "overlays/remote-group/kustomization.yaml",
			"      - op: remove\n        path: /spec/replicas\n", "      - op: replace\n        path: /spec/template/spec/enableServiceLinks\n        value: false\n",
			[]string{"StatefulSet codemode-executor sets replicas, which every apply would reset under the HorizontalPodAutoscaler codemode-executor; leave it out"},
		},
		{
			"autoscaler on memory", "overlays/remote-group", "overlays/remote-group/executor-hpa.yaml",
			"name: cpu", "name: memory",
			[]string{"HorizontalPodAutoscaler codemode-executor must scale on CPU utilization (a Resource metric cpu, averageUtilization 1 to 90): runs are CPU-bound"},
		},
		{
			"autoscaler down to one pod", "overlays/remote-group", "overlays/remote-group/executor-hpa.yaml",
			"minReplicas: 2", "minReplicas: 1",
			[]string{"HorizontalPodAutoscaler codemode-executor must keep at least 2 pods (minReplicas), and maxReplicas no fewer",
				"PodDisruptionBudget codemode-executor: maxUnavailable must let one pod of 1 go and keep the others"},
		},
		{
			"executor probes off the admin listener", "overlays/remote-group", "executor/executor-statefulset.yaml",
			"--admin-listen=0.0.0.0:9091", "--admin-listen=0.0.0.0:9092",
			[]string{"StatefulSet codemode-executor: container port admin is 9091, but --admin-listen is 0.0.0.0:9092"},
		},
		{
			"no admin token", "base", "base/gateway.yaml",
			"  tokenEnv: GATEWAY_ADMIN_TOKEN\n", "",
			[]string{"the configuration sets no admin.tokenEnv: any pod that reaches the admin listener reads its metrics and reloads it"},
		},
		{
			"admin token from a Secret the manifests do not hold", "base", "base/gateway-deployment.yaml",
			"name: codemode-gateway-admin\n                  key: token", "name: codemode-gateway\n                  key: admin-token",
			[]string{"Deployment codemode-gateway: admin.tokenEnv GATEWAY_ADMIN_TOKEN: the manifests hold no Secret codemode-gateway"},
		},
		{
			"a probe carrying the admin token", "base", "base/gateway-deployment.yaml",
			"              path: /readyz\n", "              path: /readyz\n              httpHeaders: [{name: Authorization, value: Bearer leaked}]\n",
			[]string{"Deployment codemode-gateway: readinessProbe carries an Authorization header: the probes need no token, and one written there is read by whoever reads the Deployment"},
		},
		{
			"no default deny", "base", "base/networkpolicy.yaml",
			"  podSelector: {}\n  policyTypes: [Ingress]\n", "  podSelector: {}\n  policyTypes: [Egress]\n",
			[]string{"no NetworkPolicy denies ingress by default (podSelector {}, policyTypes [Ingress], no ingress rules): a pod no policy names is open to every pod"},
		},
		{
			"gateway's listener closed", "base", "base/networkpolicy.yaml",
			"        - {port: ws, protocol: TCP}\n", "        - {port: ws, protocol: UDP}\n",
			[]string{"Deployment codemode-gateway: no NetworkPolicy admits anyone to port ws (8080): its clients could not connect"},
		},
		{
			"gateway's admin open to every pod", "base", "base/networkpolicy.yaml",
			"        - {port: ws, protocol: TCP}\n", "        - {port: ws, protocol: TCP}\n        - {port: admin, protocol: TCP}\n",
			[]string{"Deployment codemode-gateway: NetworkPolicy codemode-gateway admits anyone to port admin (9090); admit only pods app.kubernetes.io/name=prometheus in namespaces codemode-gateway/scrape=true"},
		},
		{
			"gateway's admin open to every namespace", "base", "base/networkpolicy.yaml",
			"              codemode-gateway/scrape: \"true\"\n", "              {}\n",
			[]string{"Deployment codemode-gateway: NetworkPolicy codemode-gateway admits pods app.kubernetes.io/name=prometheus in every namespace to port admin (9090); admit only pods app.kubernetes.io/name=prometheus in namespaces codemode-gateway/scrape=true"},
		},
		{
			"gateway's admin not admitted at all", "base", "base/networkpolicy.yaml",
			"        - {port: admin, protocol: TCP}\n", "        - {port: 9999, protocol: TCP}\n",
			[]string{"Deployment codemode-gateway: no NetworkPolicy admits pods app.kubernetes.io/name=prometheus in namespaces codemode-gateway/scrape=true to port admin (9090)"},
		},
		{
			"executors' metrics without a token", "overlays/remote-group", "executor/executor-statefulset.yaml",
			"            - --admin-token-env=EXECUTOR_ADMIN_TOKEN\n", "",
			[]string{"StatefulSet codemode-executor sets no --admin-token-env: any pod that reaches its admin listener reads its metrics"},
		},
		{
			"executors' admin token not from a Secret", "overlays/remote-group", "executor/executor-statefulset.yaml",
			"            - --admin-token-env=EXECUTOR_ADMIN_TOKEN\n", "            - --admin-token-env=SOMETHING_ELSE\n",
			[]string{"StatefulSet codemode-executor: --admin-token-env SOMETHING_ELSE does not come from a Secret"},
		},
		{
			"executors open to every pod", "overlays/remote-group", "executor/executor-networkpolicy.yaml",
			"      from:\n        - podSelector:\n            matchLabels:\n              app.kubernetes.io/name: codemode-gateway\n", "",
			[]string{"StatefulSet codemode-executor: NetworkPolicy codemode-executor admits anyone to port ws (8787); admit only pods app.kubernetes.io/name=codemode-gateway of this namespace"},
		},
		{
			"executors open to every namespace's gateways", "overlays/remote-group", "executor/executor-networkpolicy.yaml",
			"        - podSelector:\n            matchLabels:\n              app.kubernetes.io/name: codemode-gateway\n",
			"        - namespaceSelector: {}\n          podSelector:\n            matchLabels:\n              app.kubernetes.io/name: codemode-gateway\n",
			[]string{"StatefulSet codemode-executor: NetworkPolicy codemode-executor admits pods app.kubernetes.io/name=codemode-gateway in every namespace to port ws (8787); admit only pods app.kubernetes.io/name=codemode-gateway of this namespace"},
		},
		{
			"executors' admin open to the gateways", "overlays/remote-group", "executor/executor-networkpolicy.yaml",
			"        - {port: ws, protocol: TCP}\n", "        - {port: ws, protocol: TCP}\n        - {port: 9091, protocol: TCP}\n",
			[]string{"StatefulSet codemode-executor: NetworkPolicy codemode-executor admits pods app.kubernetes.io/name=codemode-gateway of this namespace to port admin (9091); admit only pods app.kubernetes.io/name=prometheus in namespaces codemode-gateway/scrape=true"},
		},
		{
			"executors without their policy", "overlays/remote-group", "executor/kustomization.yaml",
			"  - executor-networkpolicy.yaml\n", "",
			[]string{"StatefulSet codemode-executor: no NetworkPolicy admits pods app.kubernetes.io/name=codemode-gateway of this namespace to port ws (8787)",
				"StatefulSet codemode-executor: no NetworkPolicy admits pods app.kubernetes.io/name=prometheus in namespaces codemode-gateway/scrape=true to port admin (9091)"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			fSys := copyTree(t, "kubernetes")
			edit(t, fSys, "kubernetes/"+c.file, c.old, c.new)
			m, err := render(fSys, "kubernetes/"+c.dir)
			if err != nil {
				t.Fatalf("kustomize build: %v", err)
			}
			_, problems := checkGateway(m)
			if !slices.Equal(problems, c.want) {
				t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// operatorToken is what an operator's overlay sets as the admin token.
const operatorToken = "3n0dV9Jk2cS8pWq4xT7bYf1hLm6rZa5e"

// The probes' paths are the ones the gateway's admin listener answers
// without a token, under the admin token an operator's overlay sets the
// way docs/deployment.md says (the Secret patched), which /metrics asks
// for; and the base's configuration is ready as it is: its local group
// starts.
func TestBaseProbesAreAnsweredByTheGateway(t *testing.T) {
	fSys := copyTree(t, "kubernetes")
	files := map[string]string{
		"my-gateway/kustomization.yaml": `resources: [../kubernetes/base]
patches:
  - patch: |-
      apiVersion: v1
      kind: Secret
      metadata: {name: codemode-gateway-admin}
      stringData: {token: ` + operatorToken + `}
`}
	for name, text := range files {
		if err := fSys.WriteFile(name, []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := render(fSys, "my-gateway")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	cfg, problems := checkGateway(m)
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	var dep workloadSpec
	if err := m.spec("Deployment", "codemode-gateway", &dep); err != nil {
		t.Fatal(err)
	}
	ctr := containerNamed(&dep.Template.Spec, "gateway")
	// The pod's environment: the token from the Secret, the other secrets
	// any long value.
	getenv := func(name string) string {
		if name == cfg.Admin.TokenEnv {
			return operatorToken
		}
		return strings.Repeat("k", 48)
	}
	cfg, err = config.Parse("gateway.yaml", []byte(mountedFile(t, m)), getenv)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(cfg, gateway.Options{Getenv: getenv, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Kinds: backendkinds.All()})
	if err != nil {
		t.Fatalf("the gateway refused the base's configuration: %v", err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw.AdminHandler())
	defer srv.Close()
	get := func(path, auth string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, p := range []struct {
		probe *probe
		body  string
	}{{ctr.ReadinessProbe, "ready\n"}, {ctr.LivenessProbe, "ok\n"}} {
		h := p.probe.HTTPGet
		if code, body := get(h.Path, ""); code != http.StatusOK || body != p.body {
			t.Errorf("GET %s as the kubelet asks it: %d %q, want 200 %q", h.Path, code, body, p.body)
		}
	}
	if code, body := get("/metrics", ""); code != http.StatusUnauthorized || body != gateway.AdminTokenRequired+"\n" {
		t.Errorf("GET /metrics without the token: %d %q, want 401 %q", code, body, gateway.AdminTokenRequired+"\n")
	}
	if code, _ := get("/metrics", "Bearer "+operatorToken); code != http.StatusOK {
		t.Errorf("GET /metrics with the overlay's token: %d, want 200", code)
	}
}

// The base's placeholder token is too short for the gateway: a pod given
// it does not start, so nobody runs with a token written in this
// repository.
func TestBasePlaceholderAdminTokenIsRefused(t *testing.T) {
	m := renderOnDisk(t, "kubernetes/base")
	token, err := secretValue(m, "codemode-gateway-admin", "token")
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(name string) string {
		if name == "GATEWAY_ADMIN_TOKEN" {
			return token
		}
		return strings.Repeat("k", 48)
	}
	_, err = config.Parse("/etc/codemode/gateway.yaml", []byte(mountedFile(t, m)), getenv)
	want := "/etc/codemode/gateway.yaml:16: admin.tokenEnv: environment variable GATEWAY_ADMIN_TOKEN must hold a token of at least 16 bytes; make one with `gateway hash-key --new`"
	if err == nil || err.Error() != want {
		t.Fatalf("the base's placeholder token: %v, want %s", err, want)
	}
}

// mountedFile is the gateway.yaml of the rendering's one ConfigMap.
func mountedFile(t *testing.T, m *manifests) string {
	t.Helper()
	for _, o := range m.objects {
		if o.Kind == "ConfigMap" {
			return o.Data["gateway.yaml"]
		}
	}
	t.Fatal("the manifests hold no ConfigMap")
	return ""
}

// copyTree copies dir into an in-memory file system, at the same path.
func copyTree(t *testing.T, dir string) filesys.FileSystem {
	t.Helper()
	fSys := filesys.MakeFsInMemory()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return fSys.WriteFile(p, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	return fSys
}

// edit replaces the one occurrence of old in file.
func edit(t *testing.T, fSys filesys.FileSystem, file, old, new string) {
	t.Helper()
	b, err := fSys.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), old); n != 1 {
		t.Fatalf("%s holds %q %d times, want once", file, old, n)
	}
	if err := fSys.WriteFile(file, []byte(strings.Replace(string(b), old, new, 1))); err != nil {
		t.Fatal(err)
	}
}
