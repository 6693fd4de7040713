package deploy

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/supolka/codemode-gateway/backends/local"
	"github.com/supolka/codemode-gateway/gateway/config"
)

// The manifests' numbers that the checks hold to the gateway's code.
const (
	// shutdownAfterDrain is what `gateway serve` gives its listeners to
	// close after drainTimeout (cmd/gateway/serve.go).
	shutdownAfterDrain = 5 * time.Second
	// processOverheadMiB is what a container holds for the gateway or
	// executor server process itself, beside its worker processes.
	processOverheadMiB = 256
	// imageUser is the user the image runs as (image/passwd).
	imageUser = 65532
)

// manifests is one kustomization rendered.
type manifests struct {
	objects []object
}

// render builds the kustomization in dir of fSys with the kustomize
// library, as `kubectl apply -k` would.
func render(fSys filesys.FileSystem, dir string) (*manifests, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fSys, dir)
	if err != nil {
		return nil, err
	}
	m := &manifests{}
	for _, r := range res.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		var o object
		if err := json.Unmarshal(b, &o); err != nil {
			return nil, fmt.Errorf("%s %s: %v", r.GetKind(), r.GetName(), err)
		}
		m.objects = append(m.objects, o)
	}
	return m, nil
}

// find returns the object of that kind and name, or nil.
func (m *manifests) find(kind, name string) *object {
	for i := range m.objects {
		if o := &m.objects[i]; o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	return nil
}

// spec decodes the spec of the object of that kind and name into v.
func (m *manifests) spec(kind, name string, v any) error {
	o := m.find(kind, name)
	if o == nil {
		return fmt.Errorf("there is no %s %s", kind, name)
	}
	if err := json.Unmarshal(o.Spec, v); err != nil {
		return fmt.Errorf("%s %s: %v", kind, name, err)
	}
	return nil
}

// checker collects the problems of one rendering, each a sentence.
type checker struct{ problems []string }

func (c *checker) add(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// checkGateway holds the gateway's Deployment, Service and
// PodDisruptionBudget to the configuration the Deployment mounts, and,
// when that configuration has a remote group, the executor servers to its
// members. It returns the mounted configuration (nil when it could not be
// read) and the problems found.
func checkGateway(m *manifests) (*config.Config, []string) {
	c := &checker{}
	var dep workloadSpec
	if err := m.spec("Deployment", "codemode-gateway", &dep); err != nil {
		c.add("%v", err)
		return nil, c.problems
	}
	pod := &dep.Template.Spec
	ctr := containerNamed(pod, "gateway")
	if ctr == nil {
		c.add("Deployment codemode-gateway has no container named gateway")
		return nil, c.problems
	}
	cfg := c.mountedConfig(m, pod, ctr)
	if cfg == nil {
		return nil, c.problems
	}
	where := "Deployment codemode-gateway"
	c.listener(where, ctr, "ws", "listen", cfg.Listen)
	c.listener(where, ctr, "admin", "admin.listen", cfg.Admin.Listen)
	c.probes(where, ctr)
	c.unprivileged(where, pod, ctr)

	secrets := ctr.secretEnv()
	if env := cfg.ExecutionIDs.KeyEnv; env == "" {
		c.add("the configuration sets no executionIds.keyEnv: replicas would not route each other's executionIds")
	} else if secrets[env] == "" {
		c.add("%s: executionIds.keyEnv %s does not come from a Secret", where, env)
	}
	if env := cfg.Admin.TokenEnv; env == "" {
		c.add("the configuration sets no admin.tokenEnv: any pod that reaches the admin listener reads its metrics and reloads it")
	} else if ref := secrets[env]; ref == "" {
		c.add("%s: admin.tokenEnv %s does not come from a Secret", where, env)
	} else {
		c.adminToken(m, where, ctr, env, ref)
	}
	for _, b := range cfg.Backends {
		if b.Remote == nil {
			continue
		}
		for i, mem := range b.Remote.Members {
			if mem.KeyEnv != "" && secrets[mem.KeyEnv] == "" {
				c.add("%s: backends %s member %d's keyEnv %s does not come from a Secret", where, b.Name, i, mem.KeyEnv)
			}
		}
		if d := b.Remote.Discover; d != nil && d.KeyEnv != "" && secrets[d.KeyEnv] == "" {
			c.add("%s: backends %s discover's keyEnv %s does not come from a Secret", where, b.Name, d.KeyEnv)
		}
	}

	// The grace period runs from the preStop hook's start: the pause, then
	// the drain SIGTERM starts, then the listeners' shutdown.
	var pause time.Duration
	if ps := ctr.Lifecycle.PreStop; ps != nil && ps.Sleep != nil {
		pause = time.Duration(ps.Sleep.Seconds) * time.Second
	}
	if pause == 0 {
		c.add("%s: give the gateway a preStop sleep, so that it accepts until its endpoints are gone", where)
	}
	drain := cfg.DrainTimeout.Std()
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= pause+drain+shutdownAfterDrain {
		c.add("%s: terminationGracePeriodSeconds must be above the preStop sleep (%v), drainTimeout (%v) and the %v the listeners take to close after it", where, pause, drain, shutdownAfterDrain)
	}

	workers := int64(0)
	for _, b := range cfg.Backends {
		if b.Local != nil {
			s := b.Local.Settings(1) // explicit sizes do not depend on the CPUs
			workers += int64(s.MaxWorkers) * int64(s.WorkerMemoryMB+local.DefaultRSSHeadroomMB)
		}
	}
	c.memory(where, ctr, workers)

	labels := dep.Template.Metadata.Labels
	var svc serviceSpec
	if err := m.spec("Service", "codemode-gateway", &svc); err != nil {
		c.add("%v", err)
	} else {
		c.selects("Service codemode-gateway", svc.Selector, labels)
		wsPort, adminPort := ctr.port("ws"), ctr.port("admin")
		serves := false
		for _, p := range svc.Ports {
			switch ctr.port(p.TargetPort) {
			case wsPort:
				serves = true
			case adminPort:
				c.add("Service codemode-gateway exposes the admin listener (port %s): keep it off the tenants' network", p.TargetPort)
			}
		}
		if !serves {
			c.add("Service codemode-gateway has no port to the gateway's listener")
		}
	}
	c.disruptionBudget("codemode-gateway", m, labels, dep.Replicas)

	// Tenants connect from anywhere; the admin listener only Prometheus
	// (and the kubelet, from the node, which policies do not hold back).
	policies := c.policies(m)
	c.defaultDeny(policies)
	c.admitsAnyone(where, policies, labels, ctr, "ws")
	c.admitsOnly(where, policies, labels, ctr, "admin", monitoringPeer)

	for _, b := range cfg.Backends {
		if b.Remote != nil {
			c.executors(m, b, policies, labels)
		}
	}
	return cfg, c.problems
}

// mountedConfig finds the file the container's --config names in the
// ConfigMap mounted at its directory and parses it with the gateway's own
// config package. Only the variables the container takes from Secrets are
// set, so a secret named by the file but not given to the pod fails here.
func (c *checker) mountedConfig(m *manifests, pod *podSpec, ctr *container) *config.Config {
	file, ok := flag(ctr.Args, "config")
	if !ok {
		c.add("the gateway container's arguments give no --config")
		return nil
	}
	var volume string
	for _, vm := range ctr.VolumeMounts {
		if vm.MountPath == path.Dir(file) {
			volume = vm.Name
		}
	}
	var cmName string
	for _, v := range pod.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	cm := m.find("ConfigMap", cmName)
	if volume == "" || cm == nil {
		c.add("no ConfigMap is mounted at %s, where --config %s is", path.Dir(file), file)
		return nil
	}
	data, ok := cm.Data[path.Base(file)]
	if !ok {
		c.add("ConfigMap %s has no %s", cmName, path.Base(file))
		return nil
	}
	secrets := ctr.secretEnv()
	getenv := func(name string) string {
		if secrets[name] != "" {
			return strings.Repeat("k", 48) // any value long enough for a key
		}
		return ""
	}
	cfg, err := config.Parse(file, []byte(data), getenv)
	if err != nil {
		c.add("the mounted configuration: %v", err)
		return nil
	}
	return cfg
}

// listener checks that the container port of that name is the port of a
// configured address that a kubelet and a Service can reach.
func (c *checker) listener(where string, ctr *container, portName, key, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		c.add("%s: %s %q is not host:port", where, key, addr)
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		c.add("%s: %s %s is loopback: neither probes nor Services reach it", where, key, addr)
	}
	if got := ctr.port(portRef(portName)); strconv.Itoa(got) != port {
		c.add("%s: container port %s is %d, but %s is %s", where, portName, got, key, addr)
	}
}

// probes checks readiness on /readyz and liveness on /healthz, both on the
// admin port.
func (c *checker) probes(where string, ctr *container) {
	for _, p := range []struct {
		kind, path string
		probe      *probe
	}{{"readinessProbe", "/readyz", ctr.ReadinessProbe}, {"livenessProbe", "/healthz", ctr.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			c.add("%s: container %s has no HTTP %s", where, ctr.Name, p.kind)
			continue
		}
		get := p.probe.HTTPGet
		if get.Path != p.path {
			c.add("%s: %s asks %s; the admin listener answers %s", where, p.kind, get.Path, p.path)
		}
		if got := ctr.port(get.Port); got == 0 || got != ctr.port("admin") {
			c.add("%s: %s is on port %s, not on the admin listener", where, p.kind, get.Port)
		}
	}
}

// unprivileged checks that the pod runs as the image's user with a
// read-only root file system, no privilege escalation and no capabilities.
func (c *checker) unprivileged(where string, pod *podSpec, ctr *container) {
	sc := pod.SecurityContext
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != imageUser {
		c.add("%s: the pod must set runAsNonRoot and runAsUser %d, the image's user", where, imageUser)
	}
	cs := ctr.SecurityContext
	if cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem {
		c.add("%s: container %s must have a read-only root file system", where, ctr.Name)
	}
	if cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		c.add("%s: container %s must set allowPrivilegeEscalation: false", where, ctr.Name)
	}
	if !slices.Equal(cs.Capabilities.Drop, []string{"ALL"}) {
		c.add("%s: container %s must drop ALL capabilities", where, ctr.Name)
	}
}

// memory checks that the container requests CPU and memory and that its
// memory limit holds its worker processes at their bound (workersMiB) and
// the process that runs them.
func (c *checker) memory(where string, ctr *container, workersMiB int64) {
	r := ctr.Resources
	if r.Requests["cpu"] == "" || r.Requests["memory"] == "" {
		c.add("%s: container %s must request cpu and memory", where, ctr.Name)
	}
	limit, err := mebibytes(r.Limits["memory"])
	if err != nil {
		c.add("%s: container %s's memory limit: %v", where, ctr.Name, err)
		return
	}
	if need := workersMiB + processOverheadMiB; limit < need {
		c.add("%s: container %s's memory limit %dMi is below its worker processes at their bound and itself (%dMi)", where, ctr.Name, limit, need)
	}
}

func (c *checker) selects(where string, selector, labels map[string]string) {
	if len(selector) == 0 {
		c.add("%s selects nothing", where)
	}
	for k, v := range selector {
		if labels[k] != v {
			c.add("%s selects %s=%s, which the pods do not carry", where, k, v)
		}
	}
}

// disruptionBudget checks that a PodDisruptionBudget of that name covers
// the pods and lets at least one of them go.
func (c *checker) disruptionBudget(name string, m *manifests, labels map[string]string, replicas *int) {
	var pdb pdbSpec
	if err := m.spec("PodDisruptionBudget", name, &pdb); err != nil {
		c.add("%v", err)
		return
	}
	c.selects("PodDisruptionBudget "+name, pdb.Selector.MatchLabels, labels)
	n := 1
	if replicas != nil {
		n = *replicas
	}
	if pdb.MaxUnavailable == nil || *pdb.MaxUnavailable < 1 || *pdb.MaxUnavailable >= n {
		c.add("PodDisruptionBudget %s: maxUnavailable must let one pod of %d go and keep the others", name, n)
	}
}

// executors holds the executor servers' StatefulSet, headless Service and
// autoscaler to the remote group's members: found in DNS from the
// Service's name, or one listed member per pod by its stable name; on the
// server's port and path, with the key its server checks.
func (c *checker) executors(m *manifests, b config.Backend, policies []namedPolicy, gatewayLabels map[string]string) {
	const name = "codemode-executor"
	where := "StatefulSet " + name
	var sts workloadSpec
	if err := m.spec("StatefulSet", name, &sts); err != nil {
		c.add("%v", err)
		return
	}
	pod := &sts.Template.Spec
	ctr := containerNamed(pod, "executor")
	if ctr == nil {
		c.add("%s has no container named executor", where)
		return
	}
	listen, _ := flag(ctr.Args, "listen")
	routePath, ok := flag(ctr.Args, "path")
	if !ok {
		routePath = "/"
	}
	admin, _ := flag(ctr.Args, "admin-listen")
	c.listener(where, ctr, "ws", "--listen", listen)
	c.listener(where, ctr, "admin", "--admin-listen", admin)
	c.probes(where, ctr)
	c.unprivileged(where, pod, ctr)
	// The admin listener's /metrics asks a token from a Secret, as the
	// gateway's does.
	if env, ok := flag(ctr.Args, "admin-token-env"); !ok || env == "" {
		c.add("%s sets no --admin-token-env: any pod that reaches its admin listener reads its metrics", where)
	} else if ref := ctr.secretEnv()[env]; ref == "" {
		c.add("%s: --admin-token-env %s does not come from a Secret", where, env)
	} else {
		c.adminToken(m, where, ctr, env, ref)
	}
	// Only the gateways call members, and only Prometheus reads their
	// admin listener.
	gatewayPeer := describe(policyPeer{PodSelector: &labelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": gatewayLabels["app.kubernetes.io/name"]}}})
	c.admitsOnly(where, policies, sts.Template.Metadata.Labels, ctr, "ws", gatewayPeer)
	c.admitsOnly(where, policies, sts.Template.Metadata.Labels, ctr, "admin", monitoringPeer)

	var svc serviceSpec
	if err := m.spec("Service", sts.ServiceName, &svc); err != nil {
		c.add("%s's serviceName: %v", where, err)
		return
	}
	if svc.ClusterIP != "None" {
		c.add("Service %s must be headless (clusterIP: None): members are listed one by one", sts.ServiceName)
	}
	c.selects("Service "+sts.ServiceName, svc.Selector, sts.Template.Metadata.Labels)
	_, port, _ := net.SplitHostPort(listen)
	if len(svc.Ports) != 1 || strconv.Itoa(svc.Ports[0].Port) != port || ctr.port(svc.Ports[0].TargetPort) != ctr.port("ws") {
		c.add("Service %s must have the one port %s, to the executor's listener", sts.ServiceName, port)
	}
	if svc.PublishNotReadyAddresses {
		c.add("Service %s publishes pods that are not ready: a draining member would stay in the gateways' groups", sts.ServiceName)
	}
	replicas := sts.Replicas
	hpa := c.autoscaler(m, name, ctr)
	if hpa != nil {
		if sts.Replicas != nil {
			c.add("%s sets replicas, which every apply would reset under the HorizontalPodAutoscaler %s; leave it out", where, name)
		}
		replicas = hpa.MinReplicas
	}
	c.disruptionBudget(name, m, sts.Template.Metadata.Labels, replicas)

	switch d := b.Remote.Discover; {
	case d != nil:
		// The Service's name as a pod in the namespace resolves it, or
		// fully qualified.
		if d.DNS != sts.ServiceName && !strings.HasPrefix(d.DNS, sts.ServiceName+".") {
			c.add("backends %s discovers %s; the StatefulSet's headless Service is %s", b.Name, d.DNS, sts.ServiceName)
		}
		if strconv.Itoa(d.Port) != port || d.Path != routePath || d.Scheme != "ws" {
			c.add("backends %s discovers %s://…:%d%s; the executor servers serve ws://…:%s%s", b.Name, d.Scheme, d.Port, d.Path, port, routePath)
		}
	case hpa != nil:
		c.add("backends %s lists its members, which cannot follow the HorizontalPodAutoscaler %s; find them with discover", b.Name, name)
	default:
		n := 1
		if replicas != nil {
			n = *replicas
		}
		var want, got []string
		for i := range n {
			u := url.URL{Scheme: "ws", Host: net.JoinHostPort(fmt.Sprintf("%s-%d.%s", name, i, sts.ServiceName), port), Path: routePath}
			want = append(want, u.String())
		}
		for _, mem := range b.Remote.Members {
			got = append(got, mem.URL)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			c.add("backends %s lists members %v; the StatefulSet's %d pods are %v", b.Name, got, n, want)
		}
	}

	hash, _ := flag(ctr.Args, "key-hash")
	ref, ok := strings.CutPrefix(hash, "$(")
	if ref, _ = strings.CutSuffix(ref, ")"); !ok || ctr.secretEnv()[ref] == "" {
		c.add("%s: --key-hash must come from a Secret, as $(VARIABLE)", where)
	}

	workers := 0
	if v, ok := flag(ctr.Args, "max-workers"); ok {
		workers, _ = strconv.Atoi(v)
	}
	if workers <= 0 {
		c.add("%s: give --max-workers: the default follows the node's CPUs, not the container's", where)
	}
	c.memory(where, ctr, int64(workers)*int64(local.DefaultWorkerMemoryMB+local.DefaultRSSHeadroomMB))
}

// autoscaler checks the HorizontalPodAutoscaler of the StatefulSet name,
// when there is one: it scales that StatefulSet, from at least two pods
// (one may be disrupted while the other serves), on the CPU utilization of
// what its container requests. It returns nil when there is none.
func (c *checker) autoscaler(m *manifests, name string, ctr *container) *hpaSpec {
	if m.find("HorizontalPodAutoscaler", name) == nil {
		return nil
	}
	where := "HorizontalPodAutoscaler " + name
	var hpa hpaSpec
	if err := m.spec("HorizontalPodAutoscaler", name, &hpa); err != nil {
		c.add("%v", err)
		return nil
	}
	if ref := hpa.ScaleTargetRef; ref.APIVersion != "apps/v1" || ref.Kind != "StatefulSet" || ref.Name != name {
		c.add("%s scales %s %s %s, not the StatefulSet %s", where, ref.APIVersion, ref.Kind, ref.Name, name)
	}
	if hpa.MinReplicas == nil || *hpa.MinReplicas < 2 || hpa.MaxReplicas < *hpa.MinReplicas {
		c.add("%s must keep at least 2 pods (minReplicas), and maxReplicas no fewer", where)
	}
	cpu := false
	for _, mt := range hpa.Metrics {
		if r := mt.Resource; mt.Type == "Resource" && r != nil && r.Name == "cpu" && r.Target.Type == "Utilization" && r.Target.AverageUtilization != nil {
			cpu = *r.Target.AverageUtilization > 0 && *r.Target.AverageUtilization <= 90
		}
	}
	if !cpu {
		c.add("%s must scale on CPU utilization (a Resource metric cpu, averageUtilization 1 to 90): runs are CPU-bound", where)
	}
	if ctr.Resources.Requests["cpu"] == "" {
		c.add("%s: container %s requests no cpu, so its utilization is undefined", where, ctr.Name)
	}
	return &hpa
}

func containerNamed(pod *podSpec, name string) *container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	return nil
}
