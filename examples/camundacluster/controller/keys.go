package controller

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/backends"
)

// Storage types a CamundaCluster may name in spec.secondaryStorage, and the
// prefix of realm keys. Each starts its claim keys, so that keys of different
// resources never collide in the one Lease namespace.
const (
	StorageElasticsearch = "elasticsearch"
	StorageOpenSearch    = "opensearch"
	StorageRDBMS         = "rdbms"
	realmKeyPrefix       = "keycloak"
	keySeparator         = "|"
)

// Default ports filled into keys, so that `es.data.svc` and
// `es.data.svc:9200` are one backend.
const (
	defaultSearchPort   = 9200
	defaultPostgresPort = 5432
)

// ErrInvalidReference marks a spec field that names no usable backend or
// realm. The middleware shows it as the InvalidKey condition.
var ErrInvalidReference = errors.New("invalid reference")

// Keys returns the claim keys of cc: its storage backend and, when it names
// one, its Keycloak realm. The keys are normalized, so that two spellings of
// one backend are one key.
func Keys(cc *v1alpha1.CamundaCluster) ([]string, error) {
	storage, err := StorageKey(cc.Namespace, cc.Spec.SecondaryStorage)
	if err != nil {
		return nil, err
	}
	keys := []string{storage}
	if cc.Spec.KeycloakRealm != "" {
		realm, err := RealmKey(cc.Namespace, cc.Spec.KeycloakRealm)
		if err != nil {
			return nil, err
		}
		keys = append(keys, realm)
	}
	return keys, nil
}

// IsRealmKey reports whether key is the key of a Keycloak realm rather than
// of a storage backend.
func IsRealmKey(key string) bool { return strings.HasPrefix(key, realmKeyPrefix+keySeparator) }

// StorageKey normalizes a spec.secondaryStorage reference of a cluster in
// namespace into its claim key: `elasticsearch|https://es.data.svc:9200`,
// `rdbms|postgres.data.svc:5432/camunda`. Scheme and host are lower-cased,
// credentials, paths and queries dropped, the default port filled in, and a
// bare service name qualified with namespace.
func StorageKey(namespace, ref string) (string, error) {
	typ, addr, ok := strings.Cut(ref, keySeparator)
	typ = strings.ToLower(strings.TrimSpace(typ))
	addr = strings.TrimSpace(addr)
	if !ok || addr == "" {
		return "", fmt.Errorf("%w: secondaryStorage %q is not <type>|<address>", ErrInvalidReference, redact(ref))
	}
	switch typ {
	case StorageElasticsearch, StorageOpenSearch:
		u, err := parseHTTPURL("secondaryStorage", addr)
		if err != nil {
			return "", err
		}
		return typ + keySeparator + u.Scheme + "://" + hostPort(namespace, u, defaultSearchPort), nil
	case StorageRDBMS:
		return rdbmsKey(namespace, ref, addr)
	default:
		return "", fmt.Errorf("%w: secondaryStorage %q: unknown type %q (want %s, %s or %s)",
			ErrInvalidReference, redact(ref), typ, StorageElasticsearch, StorageOpenSearch, StorageRDBMS)
	}
}

func rdbmsKey(namespace, ref, addr string) (string, error) {
	// Credentials never enter a key: keys are stored in annotations. A
	// password may itself hold '@' or '/', a host never does: the last '@'
	// ends the user info.
	if i := strings.LastIndex(addr, "@"); i >= 0 {
		addr = addr[i+1:]
	}
	hostport, db, _ := strings.Cut(addr, "/")
	db = strings.Trim(db, "/")
	if hostport == "" || db == "" || strings.ContainsAny(db, "/?#") {
		return "", fmt.Errorf("%w: secondaryStorage %q is not rdbms|<host>[:<port>]/<database>", ErrInvalidReference, redact(ref))
	}
	u := &url.URL{Host: hostport}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%w: secondaryStorage %q names no host", ErrInvalidReference, redact(ref))
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "", fmt.Errorf("%w: secondaryStorage %q: port %q is not a number", ErrInvalidReference, redact(ref), p)
		}
	}
	return StorageRDBMS + keySeparator + hostPort(namespace, u, defaultPostgresPort) + "/" + db, nil
}

// RealmKey normalizes a spec.keycloakRealm URL of a cluster in namespace
// into its claim key, `keycloak|https://keycloak.auth.svc/realms/camunda`.
// Credentials are dropped (a password in a key would be written to the
// Lease's annotations, and would split one realm into two keys), as are the
// default port, the query and a trailing slash.
func RealmKey(namespace, realmURL string) (string, error) {
	u, err := parseHTTPURL("keycloakRealm", realmURL)
	if err != nil {
		return "", err
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	before, realm, found := strings.Cut(path, "/realms/")
	if !found || realm == "" || strings.Contains(realm, "/") {
		return "", fmt.Errorf("%w: keycloakRealm %q does not end in /realms/<realm>", ErrInvalidReference, redact(realmURL))
	}
	host := hostPort(namespace, u, 0)
	switch {
	case u.Scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	case u.Scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	}
	return realmKeyPrefix + keySeparator + u.Scheme + "://" + host + before + "/realms/" + realm, nil
}

func parseHTTPURL(field, raw string) (*url.URL, error) {
	// Credentials never enter a key, nor a message: cut the user info at the
	// last '@' before parsing, as a password may hold '/', '?', '#' or '@',
	// which would make a parser take part of it for the host or the port.
	raw = stripUserinfo(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: %w", ErrInvalidReference, field, redact(raw), redactErr(err, raw))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %s %q is not an http or https URL with a host", ErrInvalidReference, field, redact(raw))
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return nil, fmt.Errorf("%w: %s %q: port %q is not a number", ErrInvalidReference, field, redact(raw), p)
		}
	}
	return u, nil
}

// hostPort returns u's host lower-cased, qualified with namespace when it
// is a bare service name, with defaultPort when u has none (0: keep none).
func hostPort(namespace string, u *url.URL, defaultPort int) string {
	host := strings.ToLower(u.Hostname())
	if !strings.Contains(host, ".") && host != "localhost" && net.ParseIP(host) == nil {
		host = host + "." + namespace + ".svc"
	}
	port := u.Port()
	if port == "" && defaultPort != 0 {
		port = strconv.Itoa(defaultPort)
	}
	if port == "" {
		return host
	}
	return net.JoinHostPort(host, port)
}

// KeyHash is the label value that marks a workload as using key: the first
// 40 hex characters of sha256(key). Keys themselves do not fit in labels.
func KeyHash(key string) string { return backends.HashName("", key) }

// redact replaces the user info of a reference (everything between its
// scheme or type and the last '@') with REDACTED, so that no error, and so
// no InvalidKey condition, echoes a password.
func redact(ref string) string {
	at := strings.LastIndex(ref, "@")
	if at < 0 {
		return ref
	}
	start := 0
	if i := strings.Index(ref, "://"); i >= 0 && i < at {
		start = i + len("://")
	} else if i := strings.Index(ref, keySeparator); i >= 0 && i < at {
		start = i + len(keySeparator)
	}
	return ref[:start] + "REDACTED" + ref[at:]
}

// redactErr is err with raw's user info redacted: url.Parse quotes its input.
func redactErr(err error, raw string) error {
	if redact(raw) == raw {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), raw, redact(raw)))
}

// stripUserinfo removes everything between "://" and the last '@' of a URL.
func stripUserinfo(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	if at := strings.LastIndex(raw[i+len("://"):], "@"); at >= 0 {
		return raw[:i+len("://")] + raw[i+len("://")+at+1:]
	}
	return raw
}
