package claim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestValidateKeyRefusesEveryCredentialForm: the secret rule finds
// credentials in every form a database or service reference carries them,
// with or without a scheme; ValidateKey refuses the key without echoing the
// credential, and Redact shows it as the table says.
func TestValidateKeyRefusesEveryCredentialForm(t *testing.T) {
	tests := []struct {
		name, key, redacted, wantErr string
	}{
		{"user info without a scheme", "rdbms|admin:hunter2@db.data.svc:5432/app", "rdbms|REDACTED@db.data.svc:5432/app", "user:password@host"},
		{"user info without a scheme, password with '|' and '@'", "rdbms|admin:hun|t@er2@db.data.svc/app", "rdbms|REDACTED@db.data.svc/app", "user:password@host"},
		{"user info without a scheme, base64 password", "admin:hunter2//zP/4w+e=@db.data.svc/app", "REDACTED@db.data.svc/app", "user:password@host"},
		{"Go MySQL DSN", "mysql|app:hunter2@tcp(db.data.svc:3306)/app", "mysql|REDACTED@tcp(db.data.svc:3306)/app", "user:password@host"},
		{"Oracle thin JDBC", "jdbc:oracle:thin:app/hunter2@db.data.svc:1521:orcl", "REDACTED@db.data.svc:1521:orcl", "user:password@host"},
		{"query password", "postgres://db.data.svc/app?password=hunter2", "postgres://db.data.svc/app?password=REDACTED", "credential parameter"},
		{"query sslpassword after another parameter", "postgres://db.data.svc/app?sslmode=verify-full&sslpassword=hunter2&x=1", "postgres://db.data.svc/app?sslmode=verify-full&sslpassword=REDACTED&x=1", "credential parameter"},
		{"api_key, token and secret parameters", "https://api.example.com/v1?api_key=hunter2&token=hunter2&secret=hunter2", "https://api.example.com/v1?api_key=REDACTED&token=REDACTED&secret=REDACTED", "credential parameter"},
		{"upper-case parameter name", "https://api.example.com/v1?API-KEY=hunter2", "https://api.example.com/v1?API-KEY=REDACTED", "credential parameter"},
		{"JDBC URL", "jdbc:postgresql://db.data.svc/app?user=app&password=hunter2", "jdbc:postgresql://db.data.svc/app?user=app&password=REDACTED", "credential parameter"},
		{"JDBC SQL Server", "jdbc:sqlserver://db.data.svc:1433;databaseName=app;password=hunter2", "jdbc:sqlserver://db.data.svc:1433;databaseName=app;password=REDACTED", "credential parameter"},
		{"libpq key=value", "host=db.data.svc password=hunter2 dbname=app", "host=db.data.svc password=REDACTED dbname=app", "credential parameter"},
		{"libpq quoted password with a space", "host=db.data.svc password='hun ter2' dbname=app", "host=db.data.svc password=REDACTED dbname=app", "credential parameter"},
		{"libpq spaces around '='", "host=db.data.svc password = hunter2", "host=db.data.svc password = REDACTED", "credential parameter"},
		{"ADO.NET", "Server=db.data.svc;Database=app;Password=hunter2", "Server=db.data.svc;Database=app;Password=REDACTED", "credential parameter"},
		{"ADO.NET Pwd with a ';' in braces", "Server=db.data.svc;Pwd={hun;ter2=x};Database=app", "Server=db.data.svc;Pwd=REDACTED;Database=app", "credential parameter"},
		{"password holding '&' in a query", "postgres://db.data.svc/app?password=hun&ter2&sslmode=require", "postgres://db.data.svc/app?password=REDACTED&sslmode=require", "credential parameter"},
		{"Azure storage account key", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=hunter2==", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=REDACTED", "credential parameter"},
		{"URL user info still refused", "postgres://admin:hunter2@db.data.svc/app", "postgres://REDACTED@db.data.svc/app", "URL with credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := claim.ValidateKey(tt.key)
			if !errors.Is(err, claim.ErrInvalidKey) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "strip") {
				t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey naming %q and telling to strip it", tt.key, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "hun") {
				t.Errorf("ValidateKey error echoes the credential: %v", err)
			}
			if diff := cmp.Diff(tt.redacted, claim.Redact(tt.key)); diff != "" {
				t.Errorf("Redact(%q) (-want +got):\n%s", tt.key, diff)
			}
		})
	}
}

// TestValidateKeyAcceptsKeysWithoutCredentials: references that carry no
// credential stay valid and Redact shows them as they are.
func TestValidateKeyAcceptsKeysWithoutCredentials(t *testing.T) {
	validAndShownAsIs(t,
		"rdbms|db.data.svc:5432/app",
		"team@example.com/orders",
		"https://registry.example.com/image@sha256:abc",
		"elasticsearch|https://es.data.svc:9200|orders",
		"keycloak|https://kc.example.com:8443/realms/main",
		"host=db.data.svc port=5432 dbname=app user=app",
		"Server=db.data.svc;Database=app;User Id=app",
		"jdbc:postgresql://db.data.svc:5432/app?ssl=true&user=app",
		"postgres://db.data.svc/app?password=",
		"realm/ümlaut",
		"orders by region",
		"git@github.com:org/repo",
	)
}

// TestValidateKeyRefusesCharactersThatDoNotShow: line and paragraph
// separators, spaces other than U+0020, private-use code points,
// noncharacters, unassigned code points and blank-looking characters make
// keys that print as another key (or as nothing), so they are refused.
func TestValidateKeyRefusesCharactersThatDoNotShow(t *testing.T) {
	for _, tt := range []struct {
		name string
		r    rune
	}{
		{"line separator", '\u2028'},
		{"paragraph separator", '\u2029'},
		{"no-break space", '\u00A0'},
		{"em space", '\u2003'},
		{"narrow no-break space", '\u202F'},
		{"ideographic space", '\u3000'},
		{"Ogham space mark", '\u1680'},
		{"private use", '\uE000'},
		{"supplementary private use", '\U000F0000'},
		{"noncharacter in the BMP", '\uFDD0'},
		{"noncharacter at a plane's end", '\U0001FFFF'},
		{"U+FFFE", '\uFFFE'},
		{"unassigned", '\U000E0080'},
		{"Braille blank", '\u2800'},
		{"Hangul filler", '\u3164'},
		{"halfwidth Hangul filler", '\uFFA0'},
		{"Hangul choseong filler", '\u115F'},
	} {
		t.Run(tt.name, func(t *testing.T) {
			key := "realm/a" + string(tt.r) + "b"
			err := claim.ValidateKey(key)
			if !errors.Is(err, claim.ErrInvalidKey) {
				t.Fatalf("ValidateKey(%+q) = %v, want ErrInvalidKey", key, err)
			}
			if want := fmt.Sprintf("%U at byte 7", tt.r); !strings.Contains(err.Error(), want) {
				t.Errorf("ValidateKey(%+q) = %v, want the error to name the code point", key, err)
			}
		})
	}
	if err := claim.ValidateKey("orders by region"); err != nil {
		t.Errorf("ValidateKey with U+0020 = %v, want nil: the ordinary space shows", err)
	}
}

// TestRedactIsFastOnLongTexts: Redact runs on whole messages and log
// lines, which a tenant can fill with "//", '=' and '|'; judging every URL
// of such a text took tens of seconds (cubic time). The bound is generous
// for a loaded machine; the fixed rule takes milliseconds.
func TestRedactIsFastOnLongTexts(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("//", 5000), strings.Repeat("|//", 3000), strings.Repeat("a=", 5000),
		strings.Repeat("password= ", 1000), strings.Repeat(":@", 5000), strings.Repeat("//:@/", 2000),
		"password=x" + strings.Repeat(" ", 100000), "password=x" + strings.Repeat("\t&", 50000),
	} {
		start := time.Now()
		_ = claim.Redact(s)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Redact of %d bytes starting %q took %s", len(s), s[:6], d)
		}
	}
}

// TestValidateKeyErrorNeverEchoesACredentialNamedBeforeAnInvisibleSpace: a
// credential parameter whose name is followed by a space other than U+0020
// (a tab, a no-break space, an ideographic space) before its '=' is still a
// credential parameter to libpq and ADO.NET parsers that trim Unicode white
// space. The key is refused for its character, but the error, and the
// InvalidKey message the middleware makes of it through Redact, must not
// carry the password.
func TestValidateKeyErrorNeverEchoesACredentialNamedBeforeAnInvisibleSpace(t *testing.T) {
	for _, key := range []string{
		"host=db.data.svc password\t=hunter2 dbname=app",
		"Server=db.data.svc;Password\u00a0=hunter2;Database=app",
		"rdbms|db.data.svc/app?password\u3000=hunter2",
	} {
		t.Run(fmt.Sprintf("%+q", key), func(t *testing.T) {
			err := claim.ValidateKey(key)
			if !errors.Is(err, claim.ErrInvalidKey) {
				t.Fatalf("ValidateKey(%+q) = %v, want ErrInvalidKey", key, err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("ValidateKey error echoes the credential: %v", err)
			}
			if got := claim.Redact(err.Error()); strings.Contains(got, "hunter2") {
				t.Errorf("Redact(ValidateKey error) still shows the credential: %s", got)
			}
		})
	}
}

// TestRedactCoversAQuotedValueWithItsEscapedDelimiters: ADO.NET writes a
// quote inside a quoted value doubled ("a""b"), and ODBC a closing brace
// inside a braced value doubled ({a}}b}); the value runs to the quote or
// brace that is not doubled. Every part of such a password is redacted,
// including what follows the doubled delimiter.
func TestRedactCoversAQuotedValueWithItsEscapedDelimiters(t *testing.T) {
	tests := []struct{ name, key, want string }{
		{"ADO.NET doubled quote", `Server=db.data.svc;Password="hun""ter2;Server=evil";Database=app`, `Server=db.data.svc;Password=REDACTED;Database=app`},
		{"ODBC doubled brace", `Driver=pg;Server=db.data.svc;PWD={hun}}ter2;Server=evil};Database=app`, `Driver=pg;Server=db.data.svc;PWD=REDACTED;Database=app`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, claim.Redact(tt.key)); diff != "" {
				t.Errorf("Redact(%q) (-want +got):\n%s", tt.key, diff)
			}
			if err := claim.ValidateKey(tt.key); err == nil || strings.Contains(err.Error(), "ter2") || strings.Contains(err.Error(), "evil") {
				t.Errorf("ValidateKey(%q) = %v, want an error without any part of the password", tt.key, err)
			}
		})
	}
}

// TestValidateKeyRefusesOracleEasyConnectCredentials: Oracle's Easy Connect
// form "user/password@//host:port/service" (sqlplus, SQLcl, go-ora's
// DSN) carries the password before "@//", a form no key without
// credentials takes.
func TestValidateKeyRefusesOracleEasyConnectCredentials(t *testing.T) {
	for _, key := range []string{
		"scott/hunter2@//db.data.svc:1521/orcl",
		"oracle|scott/hunter2@//db.data.svc:1521/orcl",
	} {
		if err := claim.ValidateKey(key); !errors.Is(err, claim.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
		}
		if got := claim.Redact(key); strings.Contains(got, "hunter2") {
			t.Errorf("Redact(%q) = %q, still shows the password", key, got)
		}
	}
}

// TestValidateKeyAcceptsAnImageReferenceWithARegistryPort: an image pinned
// by digest in a registry with a port ("host:5000/app@sha256:...") carries
// no credential: the ':' is the port's and the '@' the digest's. It stays a
// valid key and Redact leaves it unchanged.
func TestValidateKeyAcceptsAnImageReferenceWithARegistryPort(t *testing.T) {
	validAndShownAsIs(t,
		"registry.example.com:5000/team/app@sha256:0123456789abcdef",
		"image|localhost:5000/app@sha256:0123456789abcdef",
	)
}

// TestAPasswordHoldingADoubleSlashIsNeverEchoed: errors never echo URL user
// info. Generated passwords (base64: openssl rand -base64) often hold "//";
// the user info ends at the '@', not at that "//", so neither ValidateKey's
// error nor Redact (used for messages, events and logs) shows the user name
// or any part of the password.
func TestAPasswordHoldingADoubleSlashIsNeverEchoed(t *testing.T) {
	key := "postgres://admin:Xy9kQ//zP4w+e=@db.data.svc:5432/app"
	err := claim.ValidateKey(key)
	if !errors.Is(err, claim.ErrInvalidKey) {
		t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
	}
	for _, secret := range []string{"Xy9kQ", "zP4w", "admin"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ValidateKey error echoes user info %q: %v", secret, err)
		}
		if got := claim.Redact(key); strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q still shows user info %q", key, got, secret)
		}
	}
}

// TestABase64PasswordHoldingSlashesIsRefusedOrRedacted: no error or message
// built by the library shows the user info of a URL in a key, including
// passwords holding '/' and '//', as a generated base64 password such as
// "Xy9kQ//zP/4w+e=" does. Acquire refuses such a key as InvalidKey, or grants
// it with an Outcome.Message that shows none of it; ValidateKey's error for
// the same key with a control character does not quote it either.
func TestABase64PasswordHoldingSlashesIsRefusedOrRedacted(t *testing.T) {
	const key = "postgres://admin:Xy9kQ//zP/4w+e=@db.data.svc:5432/app"
	secrets := []string{"admin", "Xy9kQ", "zP/4w"}

	t.Run("Acquire", func(t *testing.T) {
		c, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns"})
		if err != nil {
			t.Fatal(err)
		}
		self := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "w", UID: "uid-w"}
		_, o, err := c.Acquire(context.Background(), key, self)
		if err != nil {
			if !errors.Is(err, claim.ErrInvalidKey) {
				t.Fatalf("Acquire error = %v, want ErrInvalidKey", err)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("Acquire error shows user info %q: %v", s, err)
				}
			}
			return
		}
		for _, s := range secrets {
			if strings.Contains(o.Message, s) {
				t.Errorf("Acquire granted a key with user info (%s) and its message shows %q: %s", o.Reason, s, o.Message)
			}
		}
	})
	t.Run("ValidateKey control character", func(t *testing.T) {
		err := claim.ValidateKey(key + "\x01")
		if !errors.Is(err, claim.ErrInvalidKey) {
			t.Fatalf("ValidateKey = %v, want ErrInvalidKey", err)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("ValidateKey error shows user info %q: %v", s, err)
			}
		}
	})
}

// TestAPasswordHoldingABarIsRedacted: the characters a password may hold are
// not only those listed: a '|' inside a password is not a composite key's
// separator, so Redact does not leave "admin:pa" in the clear and ValidateKey
// refuses the key.
func TestAPasswordHoldingABarIsRedacted(t *testing.T) {
	const key = "postgres://admin:pa|ss@db.data.svc:5432/app"
	if got := claim.Redact(key); strings.Contains(got, "admin:pa") {
		t.Errorf("Redact(%q) = %q, shows the user info", key, got)
	}
	if err := claim.ValidateKey(key); err == nil {
		t.Errorf("ValidateKey(%q) = nil: a URL with user info is accepted and will be stored and quoted in clear", key)
	}
}

// TestValidateKeyRefusesUserInfoEndedEarlyByAPathCharacter: keys carrying URL
// user info are refused by ValidateKey, with an error that does not echo the
// password, even when the password holds '/', '?', '#' or a space (common in
// generated passwords, and allowed by the example's own normalizer),
// characters that end an RFC 3986 authority before its '@', and in a network-
// path reference ("//user:pw@host") that has no "://" at all. Accepted, such
// a key would be stored in clear on the record.
func TestValidateKeyRefusesUserInfoEndedEarlyByAPathCharacter(t *testing.T) {
	for _, key := range []string{
		"postgres://admin:hunter2/x@db.data.svc:5432/app",
		"postgres://admin:hunter2?x@db.data.svc:5432/app",
		"postgres://admin:hunter2#x@db.data.svc:5432/app",
		"postgres://admin:hunter 2@db.data.svc:5432/app",
		"//admin:hunter2@db.data.svc:5432/app",
	} {
		t.Run(key, func(t *testing.T) {
			// Given a key normalizer that forgot to strip credentials
			// When the key is validated
			err := claim.ValidateKey(key)
			// Then it is refused as InvalidKey without echoing the password
			if !errors.Is(err, claim.ErrInvalidKey) {
				t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey: the password would be stored in clear on the record", key, err)
			}
			if strings.Contains(err.Error(), "hunter") {
				t.Errorf("error echoes the password: %v", err)
			}
		})
	}
}

// TestValidateKeyRefusesZeroWidthMarks: format, bidi and zero-width
// characters are refused, zero-width marks too. Variation selectors, the
// combining grapheme joiner and the Mongolian free variation selectors are
// invisible, survive NFC, and are category Mn (not Cf), so "db" and "d<VS1>b"
// would print the same and name two claims.
func TestValidateKeyRefusesZeroWidthMarks(t *testing.T) {
	for _, key := range []string{
		"pg.data.svc/d\uFE00b",     // VARIATION SELECTOR-1
		"pg.data.svc/d\u034Fb",     // COMBINING GRAPHEME JOINER
		"pg.data.svc/d\u180Bb",     // MONGOLIAN FREE VARIATION SELECTOR ONE
		"pg.data.svc/d\U000E0100b", // VARIATION SELECTOR-17
	} {
		t.Run(strings.ToValidUTF8(key, "?"), func(t *testing.T) {
			// Given a key that prints as "pg.data.svc/db" but carries a zero-width mark
			// When it is validated (after NormalizeKey: NFC keeps these marks)
			err := claim.ValidateKey(key)
			// Then it is refused, as zero-width spaces and joiners are
			if !errors.Is(err, claim.ErrInvalidKey) {
				t.Errorf("ValidateKey(%+q) = %v, want ErrInvalidKey (zero-width character)", key, err)
			}
		})
	}
}

// TestValidateKeyErrorForAControlCharacterNeverEchoesCredentials: a key with
// user info and a control character (or another reason to refuse it) is
// refused for the user info first, and its password is never echoed.
func TestValidateKeyErrorForAControlCharacterNeverEchoesCredentials(t *testing.T) {
	for _, key := range []string{
		"https://u:hunter2@h\x1b[2J/x",
		"https://u:hunter2@[::1]:5432/x\u200b",
		"https://u:p@ss:hunter2@h/x", // '@' inside the password, cut at the last '@'
		"a|https://u:hunter2@h|https://v:hunter2@h",
		"https://u:hunter2@h" + strings.Repeat("x", claim.MaxKeyLength),
		"https://u:hunter2@h/\xff",
	} {
		err := claim.ValidateKey(key)
		if !errors.Is(err, claim.ErrInvalidKey) {
			t.Errorf("ValidateKey(%+q) = %v, want ErrInvalidKey", key, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error echoes the password: %v", err)
		}
	}
}

// validAndShownAsIs requires every key valid and left unchanged by Redact.
func validAndShownAsIs(t *testing.T, keys ...string) {
	t.Helper()
	for _, key := range keys {
		if err := claim.ValidateKey(key); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", key, err)
		}
		if got := claim.Redact(key); got != key {
			t.Errorf("Redact(%q) = %q, want it unchanged", key, got)
		}
	}
}
