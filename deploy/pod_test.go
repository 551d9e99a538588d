package deploy

import (
	"cmp"
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
	name, ip string
	root     string // where the pod's volumes live
	args     []string
	env      []string
}

// podObjects are the objects of a build a pod's volumes come from.
type podObjects struct {
	configMaps   map[string]*corev1.ConfigMap
	certificates map[string]*certificate // by secret name
	ca           *testCA
}

func newPodObjects(objs []object, ca *testCA) podObjects {
	po := podObjects{configMaps: map[string]*corev1.ConfigMap{}, certificates: map[string]*certificate{}, ca: ca}
	for _, o := range objs {
		switch v := o.v.(type) {
		case *corev1.ConfigMap:
			po.configMaps[o.name] = v
		case *certificate:
			po.certificates[v.Spec.SecretName] = v
		}
	}
	return po
}

// newPod prepares container 0 of spec as pod name with ip; volumes are
// written under root, which persists across restarts of the same pod as a
// PVC does.
func newPod(t *testing.T, spec *corev1.PodSpec, name, ip, root string, po podObjects) *pod {
	t.Helper()
	c := spec.Containers[0]
	p := &pod{name: name, ip: ip, root: root}
	mounts := p.mountVolumes(t, spec, c.VolumeMounts, po)
	vars := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = p.field(t, e.ValueFrom.FieldRef.FieldPath)
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
		default:
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// writeSecret writes a Secret's files: a Certificate's secret is issued by
// the test CA with the Certificate's names; a Secret the operator creates
// by hand gets a real NATS user's .creds for a .creds item (natsauth_test.go)
// and placeholder files for its other items.
func (p *pod) writeSecret(t *testing.T, dir string, s *corev1.SecretVolumeSource, po podObjects) {
	t.Helper()
	if c, ok := po.certificates[s.SecretName]; ok {
		po.ca.writeSecret(t, dir, c.Spec.DNSNames)
		return
	}
	for _, it := range s.Items {
		if strings.HasSuffix(it.Key, ".creds") {
			writeFile(t, filepath.Join(dir, it.Path), natsAccounts(t).creds(t, s.SecretName))
			continue
		}
		writeFile(t, filepath.Join(dir, it.Path), []byte("placeholder for "+s.SecretName+"/"+it.Key+"\n"))
	}
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
