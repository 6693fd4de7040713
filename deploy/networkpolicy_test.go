package deploy

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Who may reach an admin listener: Prometheus, in a namespace the operator
// labels (docs/deployment.md, "Network policies").
var monitoringPeer = describe(policyPeer{
	NamespaceSelector: &labelSelector{MatchLabels: map[string]string{"codemode-gateway/scrape": "true"}},
	PodSelector:       &labelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
})

type namedPolicy struct {
	name string
	spec networkPolicySpec
}

// policies decodes every NetworkPolicy of the rendering.
func (c *checker) policies(m *manifests) []namedPolicy {
	var ps []namedPolicy
	for _, o := range m.objects {
		if o.Kind != "NetworkPolicy" {
			continue
		}
		var p namedPolicy
		p.name = o.Metadata.Name
		if err := m.spec("NetworkPolicy", p.name, &p.spec); err != nil {
			c.add("%v", err)
			continue
		}
		if len(p.spec.PodSelector.MatchExpressions) > 0 {
			c.add("NetworkPolicy %s selects pods by matchExpressions, which these checks do not read: use matchLabels", p.name)
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

// limitsIngress: a policy without policyTypes limits ingress too.
func (p *namedPolicy) limitsIngress() bool {
	return len(p.spec.PolicyTypes) == 0 || slices.Contains(p.spec.PolicyTypes, "Ingress")
}

// defaultDeny checks that one policy selects every pod and admits nothing,
// so that a pod no other policy names is closed.
func (c *checker) defaultDeny(ps []namedPolicy) {
	for _, p := range ps {
		if p.limitsIngress() && len(p.spec.PodSelector.MatchLabels) == 0 && len(p.spec.Ingress) == 0 {
			return
		}
	}
	c.add("no NetworkPolicy denies ingress by default (podSelector {}, policyTypes [Ingress], no ingress rules): a pod no policy names is open to every pod")
}

// sources returns the from lists of the ingress rules, of the policies
// selecting pods with these labels, that admit TCP to the container's
// port portName; nil when none does. An empty from list admits anyone.
func sources(ps []namedPolicy, labels map[string]string, ctr *container, portName string) map[string][][]policyPeer {
	port := ctr.port(portRef(portName))
	found := map[string][][]policyPeer{}
	for _, p := range ps {
		if !p.limitsIngress() || !subset(p.spec.PodSelector.MatchLabels, labels) {
			continue
		}
		for _, r := range p.spec.Ingress {
			covers := len(r.Ports) == 0
			for _, rp := range r.Ports {
				if rp.Protocol != "" && rp.Protocol != "TCP" {
					continue
				}
				if rp.Port == nil {
					covers = true
					continue
				}
				from := ctr.port(*rp.Port)
				to := from
				if rp.EndPort != nil {
					to = *rp.EndPort
				}
				covers = covers || from <= port && port <= to
			}
			if covers {
				found[p.name] = append(found[p.name], r.From)
			}
		}
	}
	return found
}

// admitsOnly checks that some rule admits the container's port portName
// and that every rule admitting it names exactly the peer want describes.
func (c *checker) admitsOnly(where string, ps []namedPolicy, labels map[string]string, ctr *container, portName, want string) {
	port := ctr.port(portRef(portName))
	found := sources(ps, labels, ctr, portName)
	if len(found) == 0 {
		c.add("%s: no NetworkPolicy admits %s to port %s (%d)", where, want, portName, port)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(found)) {
		for _, from := range found[name] {
			if len(from) == 0 {
				c.add("%s: NetworkPolicy %s admits anyone to port %s (%d); admit only %s", where, name, portName, port, want)
			}
			for _, peer := range from {
				if got := describe(peer); got != want {
					c.add("%s: NetworkPolicy %s admits %s to port %s (%d); admit only %s", where, name, got, portName, port, want)
				}
			}
		}
	}
}

// admitsAnyone checks that a rule admits every source to the container's
// port portName: the gateway's listener faces clients outside the cluster.
func (c *checker) admitsAnyone(where string, ps []namedPolicy, labels map[string]string, ctr *container, portName string) {
	for _, rules := range sources(ps, labels, ctr, portName) {
		for _, from := range rules {
			if len(from) == 0 {
				return
			}
		}
	}
	c.add("%s: no NetworkPolicy admits anyone to port %s (%d): its clients could not connect", where, portName, ctr.port(portRef(portName)))
}

// describe says which sources a peer admits, in the words the checks'
// texts use.
func describe(p policyPeer) string {
	switch {
	case p.IPBlock != nil:
		return "addresses " + p.IPBlock.CIDR
	case p.NamespaceSelector == nil && p.PodSelector == nil:
		return "nothing (an empty peer)"
	}
	pods, namespaces := "any pod", "this namespace"
	if p.PodSelector != nil && len(p.PodSelector.MatchLabels)+len(p.PodSelector.MatchExpressions) > 0 {
		pods = "pods " + labelList(p.PodSelector)
	}
	if p.NamespaceSelector != nil {
		namespaces = "every namespace"
		if len(p.NamespaceSelector.MatchLabels)+len(p.NamespaceSelector.MatchExpressions) > 0 {
			namespaces = "namespaces " + labelList(p.NamespaceSelector)
		}
	}
	if namespaces == "this namespace" {
		return pods + " of this namespace"
	}
	return pods + " in " + namespaces
}

func labelList(s *labelSelector) string {
	if len(s.MatchExpressions) > 0 {
		return "by matchExpressions"
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		kv = append(kv, k+"="+s.MatchLabels[k])
	}
	return strings.Join(kv, ",")
}

func subset(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// adminToken checks that the Secret the admin token comes from (ref is
// "secret/key") is in the manifests, and that no probe carries a token:
// the admin listener answers the probes without one, and a token written
// in a probe could be read by whoever reads the Deployment.
func (c *checker) adminToken(m *manifests, where string, ctr *container, env, ref string) {
	name, key, _ := strings.Cut(ref, "/")
	if _, err := secretValue(m, name, key); err != nil {
		c.add("%s: admin.tokenEnv %s: %v", where, env, err)
		return
	}
	for _, p := range []struct {
		kind  string
		probe *probe
	}{{"readinessProbe", ctr.ReadinessProbe}, {"livenessProbe", ctr.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			continue // probes named it
		}
		for _, h := range p.probe.HTTPGet.HTTPHeaders {
			if strings.EqualFold(h.Name, "Authorization") {
				c.add("%s: %s carries an Authorization header: the probes need no token, and one written there is read by whoever reads the Deployment", where, p.kind)
			}
		}
	}
}

// secretValue reads a key of a Secret of the manifests, from stringData
// or data.
func secretValue(m *manifests, name, key string) (string, error) {
	s := m.find("Secret", name)
	if s == nil {
		return "", fmt.Errorf("the manifests hold no Secret %s", name)
	}
	if v, ok := s.StringData[key]; ok {
		return v, nil
	}
	if v, ok := s.Data[key]; ok {
		b, err := base64.StdEncoding.DecodeString(v)
		return string(b), err
	}
	return "", fmt.Errorf("Secret %s has no key %s", name, key)
}
