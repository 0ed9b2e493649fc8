package claim

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The secret rule: one judgement of where a key, or a message quoting one,
// carries a credential. ValidateKey refuses a key in which the rule finds
// one, and Redact replaces what it finds by "REDACTED"; the middleware's
// conditions, events and logs and kubectl claims show keys through Redact.
// The rule is broad on purpose: a key it refuses by mistake is a clear
// InvalidKey for the consumer's normalizer to fix, while a password it
// misses is written in clear on a record every reader of the claim
// namespace sees. It finds four forms:
//
//   - user info after "//" ("scheme://user:password@host", "//user@host"),
//     judged by userinfoEnd;
//   - user info without a scheme ("admin:pw@host/db", Oracle's
//     "jdbc:oracle:thin:user/pw@host"): in a run without white space, a ':'
//     that is not a scheme's "://" nor a port (digits up to a '/', as in
//     "registry:5000/app@sha256:..."), followed later in the run by an '@';
//     the user info runs from the start of its segment (after the last '|',
//     '/', '"', '=', ',', ';' or '(' before the ':') to the last '@' of the
//     run, or of its URL's part in a composite key (urlParts), so that a
//     password holding '@', '|' or '/' is covered whole;
//   - Oracle's Easy Connect user info ("user/password@//host/service",
//     easyConnectSpans): a segment holding a '/' right before "@//";
//   - a credential parameter: a name that says credential (credentialName:
//     password, pwd, secret, token, api_key, AccountKey, ...), then '='
//     (spaces allowed around it), in a query string ("?password=",
//     "&sslpassword=", JDBC's parameters), a key=value connection string
//     (libpq's "host=h password=p") or a ';'-separated one (ADO.NET's
//     "Server=h;Password=p"). Its value runs to the next separator ('&',
//     ';', '|', ',', white space) that starts another "name=", or to the end
//     of the text, so that a password holding a separator is covered whole;
//     a value in quotes or braces runs at least to the closing one, a
//     doubled closer ("a""b", {a}}b}) being an escape, not the end. White
//     space of any kind, and characters ValidateKey refuses as invisible,
//     may stand between the name and its '='.
//
// A secret is a span of text; what the rule finds is the union of the
// spans of the four forms.

// span is a half-open byte range [start, end) of a text.
type span struct{ start, end int }

// secretSpans returns the spans of s the secret rule finds a credential in,
// sorted and merged. A URL's empty user info ("//@host") is an empty span:
// it is refused, and shown as "REDACTED" as any other.
func secretSpans(s string) []span {
	var found []span
	found = append(found, urlUserinfoSpans(s)...)
	found = append(found, bareUserinfoSpans(s)...)
	found = append(found, easyConnectSpans(s)...)
	found = append(found, parameterSpans(s)...)
	return merge(found)
}

// hasSecret reports whether the secret rule finds a credential in s.
func hasSecret(s string) bool { return len(secretSpans(s)) > 0 }

// redactSecrets returns s with every span the secret rule finds replaced by
// "REDACTED"; text without one is returned unchanged. What it returns holds
// no credential by the rule but its marks: a span holding white space
// (a URL password with a space) joins two runs once replaced, which the
// rule may judge again ("x:a//p w@" shows "x:a//REDACTED@", itself user
// info without a scheme), so the replacement is repeated until nothing
// changes, a few rounds at most.
func redactSecrets(s string) string {
	for range maxRedactRounds {
		r := redactOnce(s)
		if r == s {
			return r
		}
		s = r
	}
	return s
}

// maxRedactRounds bounds redactSecrets' rounds; each round replaces more of
// the text by marks, and two or three are the most the fuzzer has needed.
const maxRedactRounds = 8

// redactOnce replaces every span the secret rule finds in s by "REDACTED".
func redactOnce(s string) string {
	spans := secretSpans(s)
	if len(spans) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(redacted)
		last = sp.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// merge sorts spans and joins those that overlap or touch.
func merge(spans []span) []span {
	if len(spans) == 0 {
		return nil
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	out := []span{spans[0]}
	for _, sp := range spans[1:] {
		last := &out[len(out)-1]
		if sp.start <= last.end {
			last.end = max(last.end, sp.end)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// urlUserinfoSpans returns the user info of every URL in s, after its "//",
// as userinfoEnd judges it.
func urlUserinfoSpans(s string) []span {
	var out []span
	for off := 0; ; {
		i := strings.Index(s[off:], "//")
		if i < 0 {
			return out
		}
		start := off + i + len("//")
		if end, ok := userinfoEnd(s[start:]); ok {
			out = append(out, span{start, start + end})
			off = start + end
			continue
		}
		off = start
	}
}

// bareUserinfoSpans returns user info without a scheme: see the rule.
func bareUserinfoSpans(s string) []span {
	var out []span
	for off := 0; off < len(s); {
		// One run: the text up to the next white space.
		end := off
		for end < len(s) && !isSpace(s[end]) {
			end++
		}
		for _, part := range urlParts(s[off:end]) {
			if sp, ok := bareUserinfo(s[off+part.start : off+part.end]); ok {
				out = append(out, span{off + part.start + sp.start, off + part.start + sp.end})
			}
		}
		off = end + 1
	}
	return out
}

// easyConnectSpans returns the user info of Oracle's Easy Connect form,
// "user/password@//host:port/service": a segment holding a '/' and ending
// at an '@' followed by "//". The segment starts after the last white
// space or '|', '"', '\”, '=', ',', ';' or '(' before the '@'. One pass,
// so that a text of many "/@//" stays linear.
func easyConnectSpans(s string) []span {
	var out []span
	segStart, slash := 0, -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isSpace(c) || strings.IndexByte("|\"'=,;(", c) >= 0:
			segStart, slash = i+1, -1
		case c == '/':
			slash = i
		case c == '@' && slash >= segStart && strings.HasPrefix(s[i+1:], "//"):
			out = append(out, span{segStart, i})
		}
	}
	return out
}

// urlParts cuts a run of a composite key at every '|' whose part holds a
// "//" ("a|https://x|https://y" is three parts), so that the user info of
// one URL ends at its own last '@'. A '|' before a part without "//" does
// not cut: a password may hold one.
func urlParts(run string) []span {
	var out []span
	start := 0
	for i := 0; i < len(run); i++ {
		if run[i] != '|' {
			continue
		}
		next := run[i+1:]
		if j := strings.IndexByte(next, '|'); j >= 0 {
			next = next[:j]
		}
		if strings.Contains(next, "//") {
			out = append(out, span{start, i})
			start = i + 1
		}
	}
	return append(out, span{start, len(run)})
}

// bareUserinfo judges one part of a run without white space: its user
// info, if any, runs from the start of the segment holding the first ':'
// that is no scheme's "://" to the part's last '@' after it.
func bareUserinfo(part string) (span, bool) {
	at := strings.LastIndexByte(part, '@')
	if at < 0 {
		return span{}, false
	}
	for c := 0; c < at; c++ {
		if part[c] != ':' || strings.HasPrefix(part[c+1:], "//") || isPort(part[c+1:]) {
			continue
		}
		start := strings.LastIndexAny(part[:c], "|/\"'=,;(") + 1
		return span{start, at}, true
	}
	return span{}, false
}

// isPort reports whether s, the text after a ':', starts with a port: one
// or more digits and then a '/' ("5000/team/app@sha256:..."). The rule
// leans here towards image references with a registry port, which are
// common keys: a password made of digits followed by '/' in a key without
// a scheme ("admin:1234/x@host") is missed.
func isPort(s string) bool {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n > 0 && n < len(s) && s[n] == '/'
}

// parameterSpans returns the values of credential parameters: see the rule.
func parameterSpans(s string) []span {
	var out []span
	for off := 0; ; {
		i := strings.IndexByte(s[off:], '=')
		if i < 0 {
			return out
		}
		eq := off + i
		off = eq + 1
		if !credentialName(nameBefore(s, eq)) {
			continue
		}
		start := eq + 1
		for start < len(s) && isSpace(s[start]) {
			start++
		}
		end := valueEnd(s, start)
		if end > start {
			out = append(out, span{start, end})
			off = end
		}
	}
}

// nameBefore returns the parameter name before the '=' at eq: the run of
// name characters ending there, white space between it and the '=' skipped.
// Any Unicode white space (a tab, a no-break space, U+3000) and any
// character ValidateKey refuses as invisible is skipped: parsers that trim
// Unicode white space still read "password\u00a0=" as a password, and the
// error refusing such a key for its character must not quote the password.
func nameBefore(s string, eq int) string {
	end := eq
	for end > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:end])
		if r == utf8.RuneError && n <= 1 || !unicode.IsSpace(r) && invisibleRune(r) == "" {
			break
		}
		end -= n
	}
	start := end
	for start > 0 && isNameByte(s[start-1]) {
		start--
	}
	return s[start:end]
}

// valueEnd returns where the value starting at start ends: at the first
// separator that starts another "name=", or at the end of s; a value in
// quotes or braces runs at least to the closing one.
func valueEnd(s string, start int) int {
	from := start
	if start < len(s) {
		if closer, ok := map[byte]byte{'\'': '\'', '"': '"', '{': '}'}[s[start]]; ok {
			if from = closingEnd(s, start+1, closer); from < 0 {
				return len(s)
			}
		}
	}
	for i := from; i < len(s); i++ {
		if strings.IndexByte("&;|,", s[i]) < 0 && !isSpace(s[i]) {
			continue
		}
		if isSpace(s[i]) && i+1 < len(s) && isSpace(s[i+1]) {
			// startsParameter skips white space: judging the last of a
			// run is enough, and keeps the scan linear.
			continue
		}
		if startsParameter(s[i+1:]) {
			return i
		}
	}
	return len(s)
}

// closingEnd returns the index just after the closer that ends a quoted or
// braced value whose text starts at from, or -1 when none does. A doubled
// closer is an escape inside the value (ADO.NET's "a""b", ODBC's {a}}b}),
// not its end: what follows it is still the password.
func closingEnd(s string, from int, closer byte) int {
	for i := from; i < len(s); i++ {
		if s[i] != closer {
			continue
		}
		if i+1 < len(s) && s[i+1] == closer {
			i++
			continue
		}
		return i + 1
	}
	return -1
}

// startsParameter reports whether s starts with a parameter name and '='
// (spaces allowed before the '=').
func startsParameter(s string) bool {
	s = strings.TrimLeft(s, " \t")
	n := 0
	for n < len(s) && isNameByte(s[n]) {
		n++
	}
	return n > 0 && strings.HasPrefix(strings.TrimLeft(s[n:], " "), "=")
}

// credentialWords are the parts of a parameter name, lower-cased and with
// '_', '-', '.' and spaces removed, that say its value is a credential.
var credentialWords = []string{
	"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "accountkey",
	"privatekey", "secretkey", "authkey", "masterkey", "clientkey", "credential", "signature",
}

// credentialName reports whether a parameter name says its value is a
// credential: it holds one of credentialWords, ends in "pwd", or is "pass",
// "pw", "sig" or "auth".
func credentialName(name string) bool {
	n := strings.ToLower(strings.NewReplacer("_", "", "-", "", ".", "", " ", "").Replace(name))
	if n == "" {
		return false
	}
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	switch n {
	case "pass", "pw", "sig", "auth":
		return true
	}
	return strings.HasSuffix(n, "pwd")
}

// isNameByte reports whether c may be part of a parameter name.
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}
