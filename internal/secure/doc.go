// Package secure holds the one rule that keeps kvrouter's listeners off
// untrusted networks without TLS: a listener bound to anything but a
// loopback address refuses to start unless TLS is configured for it, or
// the operator passed the explicit --insecure override, which is then
// logged as a warning at start.
//
// Guarantees. Check reports every offending listener in one error that
// names, for each, the flags that enable its TLS and the --insecure
// override, so an operator fixes the configuration in one round. An
// address is loopback only when its host is a loopback IP or "localhost";
// an empty host, an unspecified address (0.0.0.0, ::) and any other host
// name count as exposed, since a name may resolve to anything.
//
// What it refuses to do: it does not resolve names and does not look at
// the interfaces of the machine; it judges the configured address alone.
//
// Concurrency: stateless; safe for concurrent use.
package secure
