package claim

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
)

// MinComparableMinor is the first Kubernetes 1.x minor that promises
// comparable resourceVersions between objects of one resource (KEP-5504),
// which fencing tokens rely on.
const MinComparableMinor = 35

// WithServerVersion makes New ask the API server its version and refuse a
// server that does not promise comparable resourceVersions, rather than hand
// out fencing tokens that may not increase. Pass a discovery client, for
// example discovery.NewDiscoveryClientForConfigOrDie(mgr.GetConfig()).
func WithServerVersion(v discovery.ServerVersionInterface) Option {
	return func(o *options) { o.server = v }
}

// checkComparableVersions reports whether a server of this version orders the
// resourceVersions of one resource by write.
func checkComparableVersions(info *version.Info) error {
	major, errMajor := leadingInt(info.Major)
	minor, errMinor := leadingInt(info.Minor)
	if errMajor != nil || errMinor != nil {
		return fmt.Errorf("API server version %q (major %q, minor %q) cannot be parsed; fencing tokens need Kubernetes 1.%d or later", info.GitVersion, info.Major, info.Minor, MinComparableMinor)
	}
	if major < 1 || major == 1 && minor < MinComparableMinor {
		return fmt.Errorf("API server %s does not promise comparable resourceVersions (KEP-5504, Kubernetes 1.%d); fencing tokens would not be monotonic", info.GitVersion, MinComparableMinor)
	}
	return nil
}

// leadingInt parses the digits at the start of s: providers report minors
// such as "35+".
func leadingInt(s string) (int, error) {
	end := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if end == -1 {
		end = len(s)
	}
	return strconv.Atoi(s[:end])
}
