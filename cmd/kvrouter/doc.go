// Command kvrouter is the single binary of kvrouter: the router node, the DC
// relay, the simulated engine, the trace simulator and the demo are its
// subcommands. main stays thin: it builds the command tree, runs it under a
// context that ends on SIGINT/SIGTERM and turns the outcome into an exit code.
package main
