package filter

func init() { benchKinds = append(benchKinds, KindBloom) }
