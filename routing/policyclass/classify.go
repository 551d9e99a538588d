package policyclass

// Classification is the class a request goes to, and how it was chosen.
type Classification struct {
	// Class is the physical class's index in Profile.Classes.
	Class int
	// Fallback is set when the request named a family or class that the
	// profile does not offer (or a class a family maps to), and took the
	// default family instead.
	Fallback bool
}

// Classify returns the class of a request that asked for requested (the
// x-dynamo-meta-policy-class header, "" for none), with rawISL prompt
// tokens of which cached are cached on the best eligible worker.
func (p *Profile) Classify(requested string, rawISL, cached int) Classification {
	if i, ok := p.explicit[requested]; ok && requested != "" {
		return Classification{Class: i}
	}
	bs, ok := p.families[requested]
	fallback := requested != "" && !ok
	if !ok {
		bs = p.families[p.defaultFamily]
	}
	if len(bs) == 0 {
		// No families: the profile has one class.
		return Classification{Class: 0, Fallback: fallback}
	}
	uncached := int64(max(0, rawISL-cached))
	c := bs[0].class
	for _, b := range bs[1:] {
		if uncached < b.floor {
			break
		}
		c = b.class
	}
	return Classification{Class: c, Fallback: fallback}
}

// ClassNames lists the profile's class names in index order.
func (p *Profile) ClassNames() []string {
	out := make([]string, len(p.Classes))
	for i, c := range p.Classes {
		out[i] = c.Name
	}
	return out
}
