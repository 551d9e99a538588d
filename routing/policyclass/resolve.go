package policyclass

import (
	"math"
	"time"

	"github.com/kvrouter/kvrouter/routing/queue"
)

// resolve validates one profile at path and builds it.
func resolve(path, name string, doc profileDoc, d Defaults) (*Profile, error) {
	p := &Profile{Name: name, Order: d.Order, families: map[string][]bucket{}, explicit: map[string]int{}}
	if doc.QueuePolicy != "" {
		o, err := queue.ParseOrder(doc.QueuePolicy)
		if err != nil {
			return nil, pathError(join(path, "queue_policy"), "want fcfs or wspt, got %q", doc.QueuePolicy)
		}
		p.Order = o
	}
	if len(doc.Classes) == 0 {
		return nil, pathError(join(path, "classes"), "a profile needs at least one class")
	}
	index := map[string]int{}
	for _, n := range sortedKeys(doc.Classes) {
		cl, err := resolveClass(join(join(path, "classes"), n), n, doc.Classes[n], d)
		if err != nil {
			return nil, err
		}
		index[n] = len(p.Classes)
		p.Classes = append(p.Classes, cl)
	}
	if err := p.resolveFamilies(path, doc, index); err != nil {
		return nil, err
	}
	sel, err := resolveSelection(join(path, "worker_selection"), doc.WorkerSelection)
	if err != nil {
		return nil, err
	}
	p.Selection = sel
	return p, nil
}

// resolveClass validates one class.
func resolveClass(path, name string, doc classDoc, d Defaults) (Class, error) {
	c := Class{ClassConfig: queue.ClassConfig{Name: name, Quantum: queue.DefaultQuantum}, MaxWait: d.MaxWait}
	if v := doc.Quantum; v != nil {
		if *v <= 0 {
			return c, pathError(join(path, "quantum"), "must be > 0, got %d", *v)
		}
		c.Quantum = *v
	}
	limits := []struct {
		key string
		v   *int64
		dst *int64
	}{
		{"request_queue_limit_per_worker", doc.RequestQueueLimit, &c.RequestsPerWorker},
		{"raw_isl_token_queue_limit_per_worker", doc.RawISLTokenQueueLimit, &c.RawISLTokensPerWorker},
		{"cached_token_queue_limit_per_worker", doc.CachedTokenQueueLimit, &c.CachedTokensPerWorker},
		{"prefill_busy_threshold", doc.PrefillBusyThreshold, new(int64)},
	}
	for _, l := range limits {
		if l.v == nil {
			continue
		}
		if *l.v < 0 {
			return c, pathError(join(path, l.key), "must be >= 0, got %d", *l.v)
		}
		*l.dst = *l.v
	}
	c.Thresholds.ActivePrefillTokens = doc.PrefillBusyThreshold
	c.Thresholds.ActivePrefillTokensFrac = d.ThresholdFrac
	if v := doc.PrefillBusyThresholdFrac; v != nil {
		if !(*v >= 0) || math.IsInf(*v, 1) {
			return c, pathError(join(path, "prefill_busy_threshold_frac"), "must be finite and >= 0, got %v", *v)
		}
		c.Thresholds.ActivePrefillTokensFrac = v
	}
	if v := doc.MaxQueueWaitSecs; v != nil {
		if !(*v >= 0) || *v > 86400 {
			return c, pathError(join(path, "max_queue_wait_secs"), "must be in [0, 86400], got %v", *v)
		}
		c.MaxWait = time.Duration(*v * float64(time.Second))
	}
	return c, nil
}

// resolveFamilies validates the families and the default family, and
// records the explicit classes (those no family maps to).
func (p *Profile) resolveFamilies(path string, doc profileDoc, index map[string]int) error {
	mapped := map[string]bool{}
	for _, fam := range sortedKeys(doc.Families) {
		fp := join(join(path, "families"), fam)
		bs, err := resolveFamily(fp, doc.Families[fam], index)
		if err != nil {
			return err
		}
		for _, b := range bs {
			mapped[p.Classes[b.class].Name] = true
		}
		p.families[fam] = bs
	}
	for n, i := range index {
		if !mapped[n] {
			p.explicit[n] = i
		}
	}
	p.defaultFamily = doc.DefaultFamily
	switch {
	case doc.DefaultFamily == "" && len(doc.Families) > 0:
		return pathError(join(path, "default_policy_family"), "required when families are defined")
	case doc.DefaultFamily != "" && p.families[doc.DefaultFamily] == nil:
		return pathError(join(path, "default_policy_family"), "names no family: %q", doc.DefaultFamily)
	case len(doc.Families) == 0 && len(p.Classes) > 1:
		return pathError(join(path, "families"), "required with more than one class (which class takes requests that name none?)")
	}
	return nil
}

// resolveFamily validates one family's class or buckets.
func resolveFamily(path string, doc familyDoc, index map[string]int) ([]bucket, error) {
	switch {
	case doc.Class != "" && len(doc.Buckets) > 0:
		return nil, pathError(path, "set class or uncached_isl_buckets, not both")
	case doc.Class != "":
		i, ok := index[doc.Class]
		if !ok {
			return nil, pathError(join(path, "class"), "names no class: %q", doc.Class)
		}
		return []bucket{{floor: 0, class: i}}, nil
	case len(doc.Buckets) == 0:
		return nil, pathError(path, "needs class or uncached_isl_buckets")
	}
	out := make([]bucket, 0, len(doc.Buckets))
	for k, b := range doc.Buckets {
		bp := path + ".uncached_isl_buckets[" + itoa(k) + "]"
		if err := checkBucket(bp, k, b, out); err != nil {
			return nil, err
		}
		i, ok := index[b.Class]
		if !ok {
			return nil, pathError(join(bp, "class"), "names no class: %q", b.Class)
		}
		out = append(out, bucket{floor: *b.Floor, class: i})
	}
	return out, nil
}

// checkBucket checks a bucket's floor: the first is 0, the others strictly
// increase.
func checkBucket(path string, k int, b bucketDoc, prev []bucket) error {
	switch {
	case b.Floor == nil:
		return pathError(join(path, "floor"), "required")
	case k == 0 && *b.Floor != 0:
		return pathError(join(path, "floor"), "the first floor must be 0, got %d", *b.Floor)
	case k > 0 && *b.Floor <= prev[k-1].floor:
		return pathError(join(path, "floor"), "floors must strictly increase: %d after %d", *b.Floor, prev[k-1].floor)
	}
	return nil
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
