package main

import "github.com/spf13/cobra"

func newDemoCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Replay the bundled trace and compare routing policies",
		Long: `demo replays the bundled Mooncake synthetic trace through the routing core and
four simulated engines on a virtual clock, once per policy, and prints the comparison.
It needs nothing but this binary.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, &f, true) },
	}
	f.register(cmd, "kv,round-robin,least-loaded,two-tier,power-of-two,random")
	return cmd
}
