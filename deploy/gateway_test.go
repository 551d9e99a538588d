package deploy

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// inferencePool and httpRoute are the fields of the Gateway API Inference
// Extension's InferencePool (inference.networking.k8s.io/v1) and the
// Gateway API's HTTPRoute (gateway.networking.k8s.io/v1) that the
// manifests use, so that a misspelt field fails decoding as it would fail
// the API server's validation. Add a field when a manifest needs it, from
// the projects' API references.
type inferencePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		TargetPorts       []portNumber `json:"targetPorts"`
		AppProtocol       string       `json:"appProtocol,omitempty"`
		EndpointPickerRef *struct {
			Group       *string     `json:"group,omitempty"`
			Kind        string      `json:"kind,omitempty"`
			Name        string      `json:"name"`
			Port        *portNumber `json:"port,omitempty"`
			FailureMode string      `json:"failureMode,omitempty"`
		} `json:"endpointPickerRef"`
	} `json:"spec"`
}

type portNumber struct {
	Number int32 `json:"number"`
}

type httpRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ParentRefs []backendRef `json:"parentRefs"`
		Rules      []struct {
			Matches []struct {
				Path *struct {
					Type  string `json:"type"`
					Value string `json:"value"`
				} `json:"path,omitempty"`
			} `json:"matches,omitempty"`
			BackendRefs []backendRef `json:"backendRefs"`
			Timeouts    *struct {
				Request string `json:"request,omitempty"`
			} `json:"timeouts,omitempty"`
		} `json:"rules"`
	} `json:"spec"`
}

type backendRef struct {
	Group string `json:"group,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Name  string `json:"name"`
}

// TestGatewayPickerWiring checks that the example's pieces name each
// other: the route sends to the pool, the pool's picker is the kvrouter
// Service on the port where kvrouter serves ext_proc with --no-frontend,
// and the pool selects the vLLM pods of the engine example.
func TestGatewayPickerWiring(t *testing.T) {
	objs := decodeAll(t, build(t, "kubernetes/gateway-picker"))
	pool := find[*inferencePool](t, objs, "vllm-pool")
	route := find[*httpRoute](t, objs, "llm-route")
	if b := route.Spec.Rules[0].BackendRefs[0]; b.Kind != "InferencePool" || b.Group != "inference.networking.k8s.io" || b.Name != pool.Name {
		t.Errorf("route backend %+v, want the InferencePool %s", b, pool.Name)
	}
	ref := pool.Spec.EndpointPickerRef
	svc := find[*corev1.Service](t, objs, ref.Name)
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == ref.Port.Number }) {
		t.Errorf("picker Service %s has no port %d", svc.Name, ref.Port.Number)
	}
	if ref.FailureMode != "FailClose" && ref.FailureMode != "FailOpen" {
		t.Errorf("failureMode %q", ref.FailureMode)
	}
	dep := find[*appsv1.Deployment](t, objs, "kvrouter-epp")
	args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--no-frontend", "--ext-proc-addr=0.0.0.0:9002"} {
		if !strings.Contains(args, want) {
			t.Errorf("kvrouter args %q lack %s", args, want)
		}
	}
	engines := decodeAll(t, build(t, "kubernetes/engine-vllm"))
	vllm := find[*appsv1.StatefulSet](t, engines, "vllm")
	for k, v := range pool.Spec.Selector.MatchLabels {
		if vllm.Spec.Template.Labels[k] != v {
			t.Errorf("pool selects %s=%s, the vLLM pods have %q", k, v, vllm.Spec.Template.Labels[k])
		}
	}
}
