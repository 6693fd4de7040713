package deploy

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The few fields of Kubernetes objects the manifest checks read, decoded
// from kustomize's output. Pointers tell a field left out from one set to
// its zero value.

type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec       json.RawMessage   `json:"spec"`
	Data       map[string]string `json:"data"`
	StringData map[string]string `json:"stringData"`
}

// workloadSpec is a Deployment's or a StatefulSet's spec.
type workloadSpec struct {
	Replicas    *int   `json:"replicas"`
	ServiceName string `json:"serviceName"`
	Selector    struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec podSpec `json:"spec"`
	} `json:"template"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool  `json:"runAsNonRoot"`
		RunAsUser    *int64 `json:"runAsUser"`
	} `json:"securityContext"`
	Containers []container `json:"containers"`
	Volumes    []struct {
		Name      string `json:"name"`
		ConfigMap *struct {
			Name string `json:"name"`
		} `json:"configMap"`
	} `json:"volumes"`
}

type container struct {
	Name  string   `json:"name"`
	Image string   `json:"image"`
	Args  []string `json:"args"`
	Ports []struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
	} `json:"ports"`
	Env []struct {
		Name      string  `json:"name"`
		Value     *string `json:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"secretKeyRef"`
		} `json:"valueFrom"`
	} `json:"env"`
	Lifecycle struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int64 `json:"seconds"`
			} `json:"sleep"`
		} `json:"preStop"`
	} `json:"lifecycle"`
	ReadinessProbe  *probe `json:"readinessProbe"`
	LivenessProbe   *probe `json:"livenessProbe"`
	SecurityContext struct {
		AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `json:"drop"`
		} `json:"capabilities"`
	} `json:"securityContext"`
	Resources struct {
		Requests map[string]string `json:"requests"`
		Limits   map[string]string `json:"limits"`
	} `json:"resources"`
	VolumeMounts []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
	} `json:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path        string  `json:"path"`
		Port        portRef `json:"port"`
		HTTPHeaders []struct {
			Name  string `json:"name"`
			Value string `json:"value"`
		} `json:"httpHeaders"`
	} `json:"httpGet"`
}

type serviceSpec struct {
	ClusterIP                string            `json:"clusterIP"`
	PublishNotReadyAddresses bool              `json:"publishNotReadyAddresses"`
	Selector                 map[string]string `json:"selector"`
	Ports                    []struct {
		Name       string  `json:"name"`
		Port       int     `json:"port"`
		TargetPort portRef `json:"targetPort"`
	} `json:"ports"`
}

// hpaSpec is an autoscaling/v2 HorizontalPodAutoscaler's spec.
type hpaSpec struct {
	ScaleTargetRef struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Name       string `json:"name"`
	} `json:"scaleTargetRef"`
	MinReplicas *int `json:"minReplicas"`
	MaxReplicas int  `json:"maxReplicas"`
	Metrics     []struct {
		Type     string `json:"type"`
		Resource *struct {
			Name   string `json:"name"`
			Target struct {
				Type               string `json:"type"`
				AverageUtilization *int   `json:"averageUtilization"`
			} `json:"target"`
		} `json:"resource"`
	} `json:"metrics"`
}

type pdbSpec struct {
	MaxUnavailable *int `json:"maxUnavailable"`
	MinAvailable   *int `json:"minAvailable"`
	Selector       struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
}

// networkPolicySpec is a networking.k8s.io/v1 NetworkPolicy's spec,
// ingress only: egress is not what these policies limit.
type networkPolicySpec struct {
	PodSelector labelSelector `json:"podSelector"`
	PolicyTypes []string      `json:"policyTypes"`
	Ingress     []struct {
		Ports []struct {
			Port     *portRef `json:"port"`
			EndPort  *int     `json:"endPort"`
			Protocol string   `json:"protocol"`
		} `json:"ports"`
		From []policyPeer `json:"from"`
	} `json:"ingress"`
}

type policyPeer struct {
	PodSelector       *labelSelector `json:"podSelector"`
	NamespaceSelector *labelSelector `json:"namespaceSelector"`
	IPBlock           *struct {
		CIDR string `json:"cidr"`
	} `json:"ipBlock"`
}

type labelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []json.RawMessage `json:"matchExpressions"`
}

// portRef is a port written as a number or as the name of a container's
// port.
type portRef string

func (p *portRef) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*p = portRef(strconv.Itoa(n))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a port is a number or a name: %s", b)
	}
	*p = portRef(s)
	return nil
}

// port resolves a port reference against the container's named ports; 0
// when it names none.
func (c *container) port(ref portRef) int {
	if n, err := strconv.Atoi(string(ref)); err == nil {
		return n
	}
	for _, p := range c.Ports {
		if p.Name == string(ref) {
			return p.ContainerPort
		}
	}
	return 0
}

// secretEnv maps each variable the container takes from a Secret to
// "secret/key".
func (c *container) secretEnv() map[string]string {
	vars := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			vars[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		}
	}
	return vars
}

// flag is the value of a --name=value or --name value argument.
func flag(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// mebibytes reads a memory quantity written with a binary suffix (Ki, Mi,
// Gi), the way these manifests write them.
func mebibytes(q string) (int64, error) {
	for suffix, per := range map[string]float64{"Ki": 1.0 / 1024, "Mi": 1, "Gi": 1024} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("memory %q: %v", q, err)
			}
			return int64(float64(v) * per), nil
		}
	}
	return 0, fmt.Errorf("memory %q: write it with Ki, Mi or Gi", q)
}
