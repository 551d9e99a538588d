package policyclass

// The YAML shapes of the file. Pointers tell an absent key from a zero.

// fileDoc is the whole file: a root profile plus per-model profiles.
type fileDoc struct {
	profileDoc `yaml:",inline"`
	Profiles   map[string]profileDoc `yaml:"profiles"`
}

// profileDoc is one profile.
type profileDoc struct {
	QueuePolicy     string                  `yaml:"queue_policy"`
	DefaultFamily   string                  `yaml:"default_policy_family"`
	Families        map[string]familyDoc    `yaml:"families"`
	Classes         map[string]classDoc     `yaml:"classes"`
	WorkerSelection map[string]selectionDoc `yaml:"worker_selection"`
}

// familyDoc is a family: one class, or buckets of uncached ISL.
type familyDoc struct {
	Class   string      `yaml:"class"`
	Buckets []bucketDoc `yaml:"uncached_isl_buckets"`
}

type bucketDoc struct {
	Floor *int64 `yaml:"floor"`
	Class string `yaml:"class"`
}

// classDoc is a physical class.
type classDoc struct {
	Quantum                  *int64   `yaml:"quantum"`
	PrefillBusyThreshold     *int64   `yaml:"prefill_busy_threshold"`
	PrefillBusyThresholdFrac *float64 `yaml:"prefill_busy_threshold_frac"`
	RequestQueueLimit        *int64   `yaml:"request_queue_limit_per_worker"`
	RawISLTokenQueueLimit    *int64   `yaml:"raw_isl_token_queue_limit_per_worker"`
	CachedTokenQueueLimit    *int64   `yaml:"cached_token_queue_limit_per_worker"`
	MaxQueueWaitSecs         *float64 `yaml:"max_queue_wait_secs"`
}

// selectionDoc is one stage's worker selection.
type selectionDoc struct {
	Type   string         `yaml:"type"`
	Params map[string]any `yaml:"params"`
}
