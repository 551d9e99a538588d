package deploy

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// pod runs a container of a manifest's pod template as the kubelet would,
// on this machine: the same arguments and environment, with $(VAR)
// references expanded, the downward API's fields filled in, and every
// volume materialised under a directory of its own whose path replaces
// the mount path wherever the arguments or the environment name it.
type pod struct {
	name, ns, ip string
	root         string // where the pod's volumes live
	args         []string
	env          []string
}

// podObjects are the objects of a build a pod's volumes come from, and
// the Secrets an operator creates by hand (docs/operations.md), filled in
// once per test so that every pod reads the same token.
type podObjects struct {
	configMaps   map[string]*corev1.ConfigMap
	certificates map[string]*certificate // by secret name
	issuers      map[string]bool         // "Issuer/<name>", "ClusterIssuer/<name>"
	secrets      map[string][]byte       // "<secret>/<key>"
	ca           *testCA
}

func newPodObjects(objs []object, ca *testCA) podObjects {
	po := podObjects{configMaps: map[string]*corev1.ConfigMap{}, certificates: map[string]*certificate{},
		issuers: map[string]bool{}, secrets: map[string][]byte{}, ca: ca}
	for _, o := range objs {
		switch v := o.v.(type) {
		case *corev1.ConfigMap:
			po.configMaps[o.name] = v
		case *certificate:
			po.certificates[v.Spec.SecretName] = v
		case *issuer:
			po.issuers[o.kind+"/"+o.name] = true
		}
	}
	return po
}

// secret is the value of key in a Secret the operator creates: a NATS
// user's .creds for a .creds key (natsauth_test.go), else a random token
// (a join token, an operator token, an API key), the same for every pod.
func (po podObjects) secret(t *testing.T, name, key string) []byte {
	t.Helper()
	id := name + "/" + key
	if v, ok := po.secrets[id]; ok {
		return v
	}
	var v []byte
	if strings.HasSuffix(key, ".creds") {
		v = natsAccounts(t).creds(t, strings.TrimSuffix(key, ".creds"))
	} else {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		v = []byte(hex.EncodeToString(b))
	}
	po.secrets[id] = v
	return v
}

// newPod prepares container 0 of spec as pod name with ip; volumes are
// written under root, which persists across restarts of the same pod as a
// PVC does.
func newPod(t *testing.T, spec *corev1.PodSpec, name, ns, ip, root string, po podObjects) *pod {
	t.Helper()
	c := spec.Containers[0]
	p := &pod{name: name, ns: ns, ip: ip, root: root}
	mounts := p.mountVolumes(t, spec, c.VolumeMounts, po)
	vars := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			v = p.field(t, e.ValueFrom.FieldRef.FieldPath)
		case e.ValueFrom.SecretKeyRef != nil:
			v = string(po.secret(t, e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key))
		default:
			t.Fatalf("env %s: only fieldRef and secretKeyRef are emulated", e.Name)
		}
		v = remap(expand(v, vars), mounts)
		vars[e.Name] = v
		p.env = append(p.env, e.Name+"="+v)
	}
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		p.args = append(p.args, remap(expand(a, vars), mounts))
	}
	return p
}

func (p *pod) field(t *testing.T, path string) string {
	switch path {
	case "metadata.name":
		return p.name
	case "metadata.namespace":
		return p.ns
	case "status.podIP":
		return p.ip
	}
	t.Fatalf("downward API field %s is not emulated", path)
	return ""
}

// mountVolumes writes each mounted volume's files and returns mount path
// to local directory.
func (p *pod) mountVolumes(t *testing.T, spec *corev1.PodSpec, vms []corev1.VolumeMount, po podObjects) map[string]string {
	t.Helper()
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	out := map[string]string{}
	for _, vm := range vms {
		dir := filepath.Join(p.root, vm.Name)
		out[vm.MountPath] = dir
		v, ok := vols[vm.Name]
		switch {
		case !ok: // a volumeClaimTemplate: a directory that outlives restarts
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		case v.ConfigMap != nil:
			cm, ok := po.configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("volume %s: no ConfigMap %s in the build", vm.Name, v.ConfigMap.Name)
			}
			for k, data := range cm.Data {
				writeFile(t, filepath.Join(dir, k), []byte(data))
			}
		case v.Secret != nil:
			p.writeSecret(t, dir, v.Secret, po)
		case v.CSI != nil:
			p.issueCSI(t, dir, v.CSI, po)
		default:
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// writeSecret writes a Secret's files: a Certificate's secret is issued by
// the test CA as the Certificate asks; a Secret the operator creates by
// hand gets its items from po.secret.
func (p *pod) writeSecret(t *testing.T, dir string, s *corev1.SecretVolumeSource, po podObjects) {
	t.Helper()
	if c, ok := po.certificates[s.SecretName]; ok {
		po.ca.issue(t, dir, namesOf(t, c), secretFiles)
		return
	}
	if len(s.Items) == 0 {
		t.Fatalf("secret %s: list the items the pod reads", s.SecretName)
	}
	for _, it := range s.Items {
		writeFile(t, filepath.Join(dir, it.Path), po.secret(t, s.SecretName, it.Key))
	}
}

// csiAttributes are the volume attributes of cert-manager's csi-driver
// (csi.cert-manager.io, its v1alpha1 API) that the manifests may use, so
// that a misspelt attribute fails here as the driver would refuse it.
var csiAttributes = map[string]bool{
	"issuer-name": true, "issuer-kind": true, "issuer-group": true,
	"common-name": true, "dns-names": true, "uri-sans": true, "ip-sans": true,
	"duration": true, "renew-before": true, "key-usages": true, "key-algorithm": true,
	"key-size": true, "key-encoding": true, "reuse-private-key": true, "fs-group": true,
	"ca-file": true, "certificate-file": true, "privatekey-file": true,
}

// issueCSI does what cert-manager's csi-driver does when the pod starts:
// it issues a certificate for the volume's attributes, with ${POD_NAME}
// and ${POD_NAMESPACE} replaced by the pod's, from an issuer of the build.
func (p *pod) issueCSI(t *testing.T, dir string, v *corev1.CSIVolumeSource, po podObjects) {
	t.Helper()
	if v.Driver != "csi.cert-manager.io" {
		t.Fatalf("csi driver %s is not emulated", v.Driver)
	}
	attr := map[string]string{}
	for k, val := range v.VolumeAttributes {
		name, ok := strings.CutPrefix(k, "csi.cert-manager.io/")
		if !ok || !csiAttributes[name] {
			t.Fatalf("csi.cert-manager.io volume: unknown attribute %s", k)
		}
		attr[name] = p.expandCSI(t, val)
	}
	kind := cmp.Or(attr["issuer-kind"], "Issuer")
	if !po.issuers[kind+"/"+attr["issuer-name"]] {
		t.Fatalf("csi.cert-manager.io volume: no %s %q", kind, attr["issuer-name"])
	}
	names := certNames{dns: list(attr["dns-names"]), uris: list(attr["uri-sans"]),
		usages: usagesOf(t, list(cmp.Or(attr["key-usages"], "digital signature,key encipherment")))}
	po.ca.issue(t, dir, names, files{cert: cmp.Or(attr["certificate-file"], "tls.crt"),
		key: cmp.Or(attr["privatekey-file"], "tls.key"), ca: cmp.Or(attr["ca-file"], "ca.crt")})
}

// expandCSI replaces the variables csi-driver knows; any other fails.
func (p *pod) expandCSI(t *testing.T, s string) string {
	t.Helper()
	return os.Expand(s, func(v string) string {
		switch v {
		case "POD_NAME":
			return p.name
		case "POD_NAMESPACE":
			return p.ns
		}
		t.Fatalf("csi.cert-manager.io volume: variable ${%s} is not csi-driver's", v)
		return ""
	})
}

// list splits a comma-separated attribute.
func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// varRef is Kubernetes' $(VAR) reference.
var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) by the value of a variable defined earlier, and
// leaves unknown references as written, as Kubernetes does.
func expand(s string, vars map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// remap replaces a mount path at the start of a path in s by its local
// directory, longest mount path first.
func remap(s string, mounts map[string]string) string {
	paths := make([]string, 0, len(mounts))
	for m := range mounts {
		paths = append(paths, m)
	}
	slices.SortFunc(paths, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, m := range paths {
		re := regexp.MustCompile(regexp.QuoteMeta(m) + `(/|$|,)`)
		s = re.ReplaceAllStringFunc(s, func(x string) string { return mounts[m] + strings.TrimPrefix(x, m) })
	}
	return s
}
