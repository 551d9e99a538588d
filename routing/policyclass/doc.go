// Package policyclass reads the router policy configuration
// (--router-policy-config, a YAML file) and classifies requests into the
// physical policy classes of the admission queue (routing/queue).
//
// # The file
//
// The root of the file is a profile; "profiles" maps exact model names to
// their own profiles. A request's model takes its exact profile, else the
// root (when the root defines classes), else the synthetic single-class
// profile built from the queue flags (one class, "default"). A profile has:
//
//   - queue_policy: fcfs (default) or wspt, the order of every heap;
//   - classes: the physical classes, by name: quantum (DRR credit),
//     prefill_busy_threshold (absolute active prefill tokens) and
//     prefill_busy_threshold_frac (times max_num_batched_tokens), either of
//     which makes a worker busy for the class (OR), the three per-worker
//     queue limits, and max_queue_wait_secs;
//   - families: what clients ask for with the x-dynamo-meta-policy-class
//     header. A family is one class ("class") or uncached_isl_buckets, a
//     list of {floor, class} with floors starting at 0 and strictly
//     increasing: a request takes the bucket with the highest floor not
//     above its uncached ISL (raw ISL minus the best cached prefix over
//     the eligible workers);
//   - default_policy_family: the family of requests that name none, name
//     an unknown family, or name a class that a family maps to;
//   - worker_selection: per stage (only "aggregated" here), the selector of
//     the built-in catalogue: "default" (the kv cost model),
//     "dynamo-two-tier-cost-fn" with its params (cache_threshold,
//     balance_abs_threshold, balance_rel_threshold, host_cache_weight), or
//     any name of policy.Names() or its short name (policy.Canonical).
//
// A class that no family maps to is explicit: a header naming it selects
// it directly, bypassing classification.
//
// # Guarantees
//
// Load refuses the whole file on any error, and the error (ErrConfig)
// names the YAML path and key ("profiles.\"m\".classes.gold.quantum"), so
// the router refuses to start. Unknown keys are errors, never ignored.
// Classify is pure and deterministic; classes are ordered by name. Nothing
// panics on input; the package does no I/O beyond Load's one read.
//
// Concurrency: a loaded Config is immutable and safe for concurrent use.
package policyclass
