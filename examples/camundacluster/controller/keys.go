package controller

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
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
		return "", fmt.Errorf("%w: secondaryStorage is not <type>|<address>", ErrInvalidReference)
	}
	switch typ {
	case StorageElasticsearch, StorageOpenSearch:
		u, err := parseHTTPURL("secondaryStorage", addr)
		if err != nil {
			return "", err
		}
		hp, err := hostPort(namespace, u, defaultSearchPort)
		if err != nil {
			return "", fmt.Errorf("%w: secondaryStorage: %w", ErrInvalidReference, err)
		}
		return typ + keySeparator + u.Scheme + "://" + hp, nil
	case StorageRDBMS:
		return rdbmsKey(namespace, addr)
	default:
		// The type is named only when it is a plain word: the reference
		// may carry a password anywhere.
		shown := ""
		if isDatabaseName(typ) && len(typ) <= 32 {
			shown = fmt.Sprintf(" %q", typ)
		}
		return "", fmt.Errorf("%w: secondaryStorage: unknown type%s (want %s, %s or %s)",
			ErrInvalidReference, shown, StorageElasticsearch, StorageOpenSearch, StorageRDBMS)
	}
}

// rdbmsKey builds an rdbms key from the parsed host, port and database of
// addr only: user info before the last '@' and options after the database
// ("?sslmode=", ";password=", "&password=") never enter it, and what is kept
// must look like a host and a database name, so that nothing else a tenant
// wrote is stored in the record's annotations. Errors name what is wrong,
// never the reference: it may carry a password.
func rdbmsKey(namespace, addr string) (string, error) {
	const want = "secondaryStorage is not rdbms|<host>[:<port>]/<database>"
	// A password may itself hold '@' or '/', a host never does: the last
	// '@' ends the user info.
	if i := strings.LastIndex(addr, "@"); i >= 0 {
		addr = addr[i+1:]
	}
	hostport, db, _ := strings.Cut(addr, "/")
	if i := strings.IndexAny(db, "?#;&"); i >= 0 {
		db = db[:i]
	}
	db = strings.Trim(db, "/")
	if hostport == "" || db == "" {
		return "", fmt.Errorf("%w: %s", ErrInvalidReference, want)
	}
	if !isDatabaseName(db) {
		return "", fmt.Errorf("%w: %s: the database name may hold letters, digits, '_', '-', '.' and '$' only", ErrInvalidReference, want)
	}
	u := &url.URL{Host: hostport}
	if u.Hostname() == "" {
		return "", fmt.Errorf("%w: secondaryStorage names no host", ErrInvalidReference)
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return "", fmt.Errorf("%w: secondaryStorage: the port is not a number", ErrInvalidReference)
		}
	}
	hp, err := hostPort(namespace, u, defaultPostgresPort)
	if err != nil {
		return "", fmt.Errorf("%w: secondaryStorage: %w", ErrInvalidReference, err)
	}
	return StorageRDBMS + keySeparator + hp + "/" + db, nil
}

// isDatabaseName reports whether s is a plain database name: letters,
// digits, '_', '-', '.' and '$'.
func isDatabaseName(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-.$", r) {
			return false
		}
	}
	return s != ""
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
		return "", fmt.Errorf("%w: keycloakRealm does not end in /realms/<realm>", ErrInvalidReference)
	}
	// Only the parsed host, port, path and realm name enter the key: a
	// path segment or realm name with anything but plain name characters
	// (";password=", an escaped character) is refused.
	for _, seg := range strings.Split(strings.Trim(before, "/")+"/"+realm, "/") {
		if seg != "" && !isDatabaseName(seg) {
			return "", fmt.Errorf("%w: keycloakRealm: its path and realm name may hold letters, digits, '_', '-', '.' and '$' only", ErrInvalidReference)
		}
	}
	host, err := hostPort(namespace, u, 0)
	if err != nil {
		return "", fmt.Errorf("%w: keycloakRealm: %w", ErrInvalidReference, err)
	}
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
		// url.Error quotes its input: only its cause is shown.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %s is not a URL: %s", ErrInvalidReference, field, claim.Redact(err.Error()))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return nil, fmt.Errorf("%w: %s is not an http or https URL with a host", ErrInvalidReference, field)
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.ParseUint(p, 10, 16); err != nil {
			return nil, fmt.Errorf("%w: %s: the port is not a number", ErrInvalidReference, field)
		}
	}
	return u, nil
}

// hostPort returns u's host lower-cased, qualified with namespace when it
// is a bare service name, with defaultPort when u has none (0: keep none).
// A host that is neither an IP address nor a DNS name is refused, without
// quoting it.
func hostPort(namespace string, u *url.URL, defaultPort int) (string, error) {
	host := strings.ToLower(u.Hostname())
	ip := net.ParseIP(host) != nil
	if !ip && len(validation.IsDNS1123Subdomain(host)) > 0 {
		return "", errors.New("the host is neither a DNS name nor an IP address")
	}
	if !strings.Contains(host, ".") && host != "localhost" && !ip {
		host = host + "." + namespace + ".svc"
	}
	port := u.Port()
	if port == "" && defaultPort != 0 {
		port = strconv.Itoa(defaultPort)
	}
	if port == "" {
		if strings.Contains(host, ":") {
			return "[" + host + "]", nil
		}
		return host, nil
	}
	return net.JoinHostPort(host, port), nil
}

// KeyHash is the label value that marks a workload as using key: the first
// 40 hex characters of sha256(key). Keys themselves do not fit in labels.
func KeyHash(key string) string { return backends.HashName("", key) }

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
