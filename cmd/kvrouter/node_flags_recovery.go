package main

import "github.com/spf13/pflag"

// registerRecovery binds what a member does with corrupt local state.
func (f *nodeFlags) registerRecovery(fs *pflag.FlagSet) {
	fs.BoolVar(&f.cfg.Cluster.Recovery.RebuildOnCorruption, "rebuild-on-corruption", true, "a member whose raft log fails its checksums at start (or whose corrupt newest snapshots leave a gap to its log) sets its data aside (data_dir/corrupt-<time>), rejoins empty and is rebuilt from its peers; false refuses to start and leaves the decision to the operator")
}
