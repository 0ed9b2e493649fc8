package controller

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/claim"
)

// DefaultPort is PostgreSQL's port, filled in when a URL names none, so that
// `pg.data.svc` and `pg.data.svc:5432` are one key.
const DefaultPort = "5432"

// Key returns the claim key of db: its logical database, as
// `postgres://host:port/dbname`, whatever spelling spec.url uses.
func Key(db *v1alpha1.Database) (string, error) {
	key, err := NormalizeURL(db.Spec.URL)
	if err != nil {
		return "", fmt.Errorf("spec.url: %w", err)
	}
	return key, nil
}

// NormalizeURL turns a PostgreSQL connection URL into the key of the
// database it names: scheme postgres (postgresql is the same), host in lower
// case, the port (5432 when none is given), the database name. Credentials
// and options are dropped: they do not change which database it is, and a key
// is stored in the claim record's annotations, where a password must never
// go. Database names are case-sensitive in PostgreSQL and kept as given.
func NormalizeURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Error quotes the whole URL, password included.
		return "", errors.New("not a URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
	default:
		return "", fmt.Errorf("scheme %q: want postgres:// or postgresql://", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	if host == "" {
		return "", errors.New("names no host")
	}
	port := u.Port()
	if port == "" {
		port = DefaultPort
	}
	name := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/"), "/")
	if name == "" || strings.Contains(name, "/") {
		return "", fmt.Errorf("path %q: want exactly one database name, as in postgres://host/dbname", claim.Redact(u.Path))
	}
	// Only the parsed host, port and database name enter the key, and
	// errors never quote what the tenant wrote: a path may carry
	// ";password=".
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-.$", r) {
			return "", errors.New("database name: may hold letters, digits, '_', '-', '.' and '$' only")
		}
	}
	return "postgres://" + net.JoinHostPort(host, port) + "/" + name, nil
}
