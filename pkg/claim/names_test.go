package claim

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		wantErr string
	}{
		{"given a storage URL then it is valid", "elasticsearch|https://es.data.svc:9200", ""},
		{"given a database key then it is valid", "7291846512/orders", ""},
		{"given unicode then it is valid", "realm/ümlaut", ""},
		{"given an empty key then it is rejected", "", "key is empty"},
		{"given a huge key then it is rejected", strings.Repeat("k", MaxKeyLength+1), "the limit is 1024"},
		{"given a key of exactly the limit then it is valid", strings.Repeat("k", MaxKeyLength), ""},
		{"given non-UTF-8 then it is rejected", "a\xffb", "not valid UTF-8"},
		{"given a newline then it is rejected", "a\nb", "control character at byte 1"},
		{"given a NUL then it is rejected", "a\x00", "control character at byte 1"},
		{"given a C1 control then it is rejected", "a\u0085", "control character"},
		{"given a zero-width space then it is rejected", "realm/a\u200bb", "format character U+200B at byte 7"},
		{"given a zero-width joiner then it is rejected", "a\u200db", "format character U+200D"},
		{"given a word joiner then it is rejected", "a\u2060b", "format character U+2060"},
		{"given a byte order mark then it is rejected", "\ufeffrealm", "format character U+FEFF at byte 0"},
		{"given a right-to-left override then it is rejected", "db/\u202eredro", "format character U+202E"},
		{"given a left-to-right embedding then it is rejected", "db/\u202aorders", "format character U+202A"},
		{"given a right-to-left isolate then it is rejected", "db/\u2067orders\u2069", "format character U+2067"},
		{"given a soft hyphen then it is rejected", "or\u00adders", "format character U+00AD"},
		{"given a URL with user and password then it is rejected", "https://admin:hunter2@keycloak.example.com/realms/main", "looks like a URL with credentials (user info); strip them in Config.Normalize"},
		{"given a URL with a user only then it is rejected", "ssh://git@github.com/org/repo", "looks like a URL with credentials"},
		{"given a URL with user info inside a composite key then it is rejected", "elasticsearch|https://u:p@es.data.svc:9200|index", "looks like a URL with credentials"},
		{"given an @ in a URL's path then it is valid", "https://registry.example.com/image@sha256:abc", ""},
		{"given an @ without a URL then it is valid", "team@example.com/orders", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateKey(tt.key)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ValidateKey() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("ValidateKey() = %v, want error containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !errors.Is(err, ErrInvalidKey):
				t.Fatalf("ValidateKey() = %v, does not wrap ErrInvalidKey", err)
			}
		})
	}
}

// TestValidateKeyNeverEchoesUserInfo: Given keys whose URL carries a
// password, When ValidateKey refuses them for any reason, Then the error
// names the key with its user info redacted and never contains the password.
func TestValidateKeyNeverEchoesUserInfo(t *testing.T) {
	const password = "s3cr3t-pa55"
	tests := []struct {
		name string
		key  string
		want string
	}{
		{"given user info then the redacted key is named", "https://admin:" + password + "@kc.example.com/realms/main", `key "https://REDACTED@kc.example.com/realms/main"`},
		{"given a key too long then its start is redacted", "https://admin:" + password + "@kc.example.com/" + strings.Repeat("r", MaxKeyLength), `key starts "https://REDACTED@kc.example.com/"`},
		{"given invalid UTF-8 then the redacted key is named", "https://admin:" + password + "@kc\xff", `key "https://REDACTED@kc\xff"`},
		{"given two URLs then both are redacted", "a|https://u:" + password + "@h1/x|https://v:" + password + "@h2", `key "a|https://REDACTED@h1/x|https://REDACTED@h2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateKey(tt.key)
			if err == nil {
				t.Fatal("ValidateKey() = nil, want an error")
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("ValidateKey() = %q: echoes the password", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ValidateKey() = %q, want it to contain %s", err, tt.want)
			}
		})
	}
}

// FuzzValidateKey pins the one secret rule: ValidateKey refuses exactly
// the keys in which it finds a credential, Redact changes exactly those
// texts, and what Redact shows holds no credential but its "REDACTED"
// marks (redacting twice changes nothing).
func FuzzValidateKey(f *testing.F) {
	for _, seed := range []string{
		"", "a", "elasticsearch|https://es.data.svc:9200", strings.Repeat("a", 253), strings.Repeat("-.", 100), "ü\x00\xff",
		"https://u:p@h", "a\u200bb", "rdbms|admin:pw@host/db", "jdbc:postgresql://h/db?user=u&password=p",
		"host=h password='a b' dbname=d", "Server=h;Password={p;w}", "a\u2800b", "https://registry.example.com/image@sha256:abc",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !hasSecret(s) && Redact(s) != s {
			t.Fatalf("the secret rule finds no credential in %q but Redact gives %q", s, Redact(s))
		}
		if r := Redact(s); Redact(r) != r {
			t.Fatalf("Redact(%q) = %q still shows a credential: redacting it again gives %q", s, r, Redact(r))
		}
		if ValidateKey(s) != nil {
			return
		}
		// A valid key is free of credentials and of characters that do
		// not show.
		if hasSecret(s) {
			t.Fatalf("ValidateKey accepted %q, which carries a credential by the secret rule", s)
		}
		for _, r := range s {
			if invisibleRune(r) != "" || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zs, r) && r != ' ' {
				t.Fatalf("ValidateKey accepted %q, which has the invisible character %U", s, r)
			}
		}
		if !norm.NFC.IsNormalString(s) {
			t.Fatalf("ValidateKey accepted %q, which is not NFC", s)
		}
		if !utf8.ValidString(s) || len(s) > MaxKeyLength {
			t.Fatalf("ValidateKey accepted %q, which is invalid UTF-8 or too long", s)
		}
	})
}
