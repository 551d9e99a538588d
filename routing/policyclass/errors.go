package policyclass

import (
	"errors"
	"fmt"
)

// ErrConfig is wrapped by every error of Load and Parse; the message names
// the YAML path and key.
var ErrConfig = errors.New("policyclass: invalid policy config")

// pathError names path in a configuration error.
func pathError(path, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, path, fmt.Sprintf(format, args...))
}

// join builds a YAML path; keys that are not plain identifiers are quoted.
func join(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	if !plain {
		key = fmt.Sprintf("%q", key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
