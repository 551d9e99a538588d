package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizations are every kustomization the repository ships.
var kustomizations = []string{
	"kubernetes/overlays/dc1",
	"kubernetes/overlays/dc2",
	"kubernetes/engine-vllm",
	"kubernetes/federation",
	"kubernetes/gateway-picker",
}

// build runs kustomize on dir, as `kustomize build dir` does.
func build(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return m
}

// kinds maps every kind the manifests use to the Go type it must decode
// into without unknown fields: Kubernetes' own API types, and for
// cert-manager the fields of its v1 API that the manifests use.
var kinds = map[string]func() any{
	"v1/ConfigMap":                                 func() any { return new(corev1.ConfigMap) },
	"v1/Namespace":                                 func() any { return new(corev1.Namespace) },
	"v1/Service":                                   func() any { return new(corev1.Service) },
	"apps/v1/StatefulSet":                          func() any { return new(appsv1.StatefulSet) },
	"apps/v1/Deployment":                           func() any { return new(appsv1.Deployment) },
	"policy/v1/PodDisruptionBudget":                func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy":           func() any { return new(networkingv1.NetworkPolicy) },
	"cert-manager.io/v1/Certificate":               func() any { return new(certificate) },
	"cert-manager.io/v1/Issuer":                    func() any { return new(issuer) },
	"cert-manager.io/v1/ClusterIssuer":             func() any { return new(issuer) },
	"inference.networking.k8s.io/v1/InferencePool": func() any { return new(inferencePool) },
	"gateway.networking.k8s.io/v1/HTTPRoute":       func() any { return new(httpRoute) },
}

// decodeStrict decodes a resource's JSON into the type of its kind,
// rejecting unknown fields.
func decodeStrict(apiVersion, kind string, js []byte) (any, error) {
	newObj, ok := kinds[apiVersion+"/"+kind]
	if !ok {
		return nil, fmt.Errorf("no schema for %s %s: add its type to kinds", apiVersion, kind)
	}
	obj := newObj()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func TestKustomizationsBuildAndDecodeStrictly(t *testing.T) {
	for _, dir := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			m := build(t, dir)
			if m.Size() == 0 {
				t.Fatal("no resources")
			}
			for _, r := range m.Resources() {
				js, err := r.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				if _, err := decodeStrict(r.GetApiVersion(), r.GetKind(), js); err != nil {
					t.Errorf("%s %s: %v", r.GetKind(), r.GetName(), err)
				}
			}
		})
	}
}

// TestOverlaysNameTheirDC checks what an overlay exists for: every
// component of the DC runs with the DC's name and in its namespace.
func TestOverlaysNameTheirDC(t *testing.T) {
	for _, dc := range []string{"dc1", "dc2"} {
		t.Run(dc, func(t *testing.T) {
			objs := decodeAll(t, build(t, "kubernetes/overlays/"+dc))
			for _, w := range workloads(objs) {
				if w.ns != "kvr-"+dc {
					t.Errorf("%s in namespace %q", w.name, w.ns)
				}
				if w.name == "kvrouter-nats" {
					continue
				}
				if got := envValue(w.spec.Containers[0].Env, "KVR_DC"); got != dc {
					t.Errorf("%s: KVR_DC = %q", w.name, got)
				}
				for _, v := range w.spec.Volumes {
					if v.CSI == nil {
						continue
					}
					if uris := v.CSI.VolumeAttributes["csi.cert-manager.io/uri-sans"]; !identitiesOf(uris, dc) {
						t.Errorf("%s: volume %s names %q, not an identity of %s", w.name, v.Name, uris, dc)
					}
				}
			}
			for _, o := range objs {
				if c, ok := o.v.(*certificate); ok && !identitiesOf(strings.Join(c.Spec.URIs, ","), dc) {
					t.Errorf("Certificate %s names %v, not an identity of %s", o.name, c.Spec.URIs, dc)
				}
			}
		})
	}
}

// TestRouterStatefulSetShape checks the properties the operations guide
// relies on.
func TestRouterStatefulSetShape(t *testing.T) {
	objs := decodeAll(t, build(t, "kubernetes/overlays/dc1"))
	sts := find[*appsv1.StatefulSet](t, objs, "kvrouter")
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("replicas = %v, want 3", sts.Spec.Replicas)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Errorf("want one PVC template for the data dir")
	}
	svc := find[*corev1.Service](t, objs, sts.Spec.ServiceName)
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("service %s must be headless and publish unready pods", svc.Name)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe.HTTPGet.Path != "/ready" || c.LivenessProbe.HTTPGet.Path != "/health" {
		t.Errorf("probes: readiness %s, liveness %s", c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		t.Error("no preStop")
	}
	sc := sts.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("pods must run as non-root")
	}
	find[*policyv1.PodDisruptionBudget](t, objs, "kvrouter")
	relay := find[*appsv1.Deployment](t, objs, "kvrouter-relay")
	if relay.Spec.Replicas == nil || *relay.Spec.Replicas != 2 {
		t.Errorf("relay replicas = %v, want 2", relay.Spec.Replicas)
	}
}

// TestTLSOnEverywhere checks that every kvrouter process of every overlay
// is configured with TLS on each of its listeners and links.
func TestTLSOnEverywhere(t *testing.T) {
	want := map[string][]string{
		"kvrouter":       {"KVR_TLS_CERT", "KVR_TLS_KEY", "KVR_CLUSTER_TLS_CERT", "KVR_CLUSTER_TLS_KEY", "KVR_CLUSTER_TLS_CA", "KVR_NATS_CREDS"},
		"kvrouter-relay": {"KVR_GATEWAY_TLS_CERT", "KVR_GATEWAY_TLS_KEY", "KVR_WAN_TLS_CERT", "KVR_WAN_TLS_KEY", "KVR_WAN_TLS_CA", "KVR_CLUSTER_TLS_CERT", "KVR_CLUSTER_TLS_KEY", "KVR_CLUSTER_TLS_CA", "KVR_NATS_CREDS"},
	}
	for _, dc := range []string{"dc1", "dc2"} {
		for _, w := range workloads(decodeAll(t, build(t, "kubernetes/overlays/"+dc))) {
			env := w.spec.Containers[0].Env
			for _, name := range want[w.name] {
				if envValue(env, name) == "" {
					t.Errorf("%s/%s: %s unset", dc, w.name, name)
				}
			}
			if n := envValue(env, "KVR_NATS"); n != "" && n[:6] != "tls://" {
				t.Errorf("%s/%s: KVR_NATS %q is not tls://", dc, w.name, n)
			}
		}
	}
}

// identitiesOf reports whether every URI SAN of a comma-separated list
// is a kvr:// identity of dc (an empty list is).
func identitiesOf(uris, dc string) bool {
	for _, u := range strings.Split(uris, ",") {
		if u != "" && !strings.HasPrefix(strings.TrimSpace(u), "kvr://"+dc+"/") {
			return false
		}
	}
	return true
}

type object struct {
	kind, name, ns string
	v              any
}

func decodeAll(t *testing.T, m resmap.ResMap) []object {
	t.Helper()
	var out []object
	for _, r := range m.Resources() {
		js, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		v, err := decodeStrict(r.GetApiVersion(), r.GetKind(), js)
		if err != nil {
			t.Fatalf("%s %s: %v", r.GetKind(), r.GetName(), err)
		}
		out = append(out, object{kind: r.GetKind(), name: r.GetName(), ns: r.GetNamespace(), v: v})
	}
	return out
}

func find[T any](t *testing.T, objs []object, name string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.v.(T); ok && o.name == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T named %s", zero, name)
	return zero
}

type workload struct {
	name, ns string
	spec     *corev1.PodSpec
}

func workloads(objs []object) []workload {
	var out []workload
	for _, o := range objs {
		switch v := o.v.(type) {
		case *appsv1.StatefulSet:
			out = append(out, workload{o.name, o.ns, &v.Spec.Template.Spec})
		case *appsv1.Deployment:
			out = append(out, workload{o.name, o.ns, &v.Spec.Template.Spec})
		}
	}
	return out
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
