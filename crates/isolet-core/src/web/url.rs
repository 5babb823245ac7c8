//! `URL` and `URLSearchParams` (the WHATWG URL standard): parsing and setters by ada
//! (https://github.com/ada-url/ada), which passes every case of WPT's `urltestdata.json`,
//! and the `application/x-www-form-urlencoded` parser.
use ada_url::Url;

/// A parsed URL as the sandbox's `URL` object keeps it: its attributes in this order.
pub type UrlRecord = [String; 11];

/// `UrlRecord`'s fields, in order (the JS side reads them by these positions).
pub const RECORD_FIELDS: [&str; 11] =
    ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"];

fn record(url: &Url) -> UrlRecord {
    [
        url.href().to_string(),
        url.origin(),
        url.protocol().to_string(),
        url.username().to_string(),
        url.password().to_string(),
        url.host().to_string(),
        url.hostname().to_string(),
        url.port().to_string(),
        url.pathname().to_string(),
        url.search().to_string(),
        url.hash().to_string(),
    ]
}

/// `new URL(input, base)`: the record, or `None` when the standard's parser fails.
pub fn parse(input: &str, base: Option<&str>) -> Option<UrlRecord> {
    Url::parse(input, base).ok().map(|url| record(&url))
}

/// `URL.canParse(input, base)`.
pub fn can_parse(input: &str, base: Option<&str>) -> bool {
    Url::can_parse(input, base)
}

/// The URL's attribute setters, by the name JS uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setter {
    Href,
    Protocol,
    Username,
    Password,
    Host,
    Hostname,
    Port,
    Pathname,
    Search,
    Hash,
}

impl Setter {
    pub fn named(name: &str) -> Option<Setter> {
        Some(match name {
            "href" => Setter::Href,
            "protocol" => Setter::Protocol,
            "username" => Setter::Username,
            "password" => Setter::Password,
            "host" => Setter::Host,
            "hostname" => Setter::Hostname,
            "port" => Setter::Port,
            "pathname" => Setter::Pathname,
            "search" => Setter::Search,
            "hash" => Setter::Hash,
            _ => return None,
        })
    }
}

/// Sets attribute `setter` of the URL whose href is `href` to `value`: the new record. A
/// value the standard's setter rejects leaves the URL as it was (as in browsers), except
/// `href`, whose failure is `None` (a TypeError in JS).
pub fn set(href: &str, setter: Setter, value: &str) -> Option<UrlRecord> {
    let mut url = Url::parse(href, None).ok()?;
    let ok = match setter {
        Setter::Href => url.set_href(value).is_ok(),
        Setter::Protocol => url.set_protocol(value).is_ok(),
        Setter::Username => url.set_username(Some(value)).is_ok(),
        Setter::Password => url.set_password(Some(value)).is_ok(),
        Setter::Host => url.set_host(Some(value)).is_ok(),
        Setter::Hostname => url.set_hostname(Some(value)).is_ok(),
        Setter::Port => url.set_port(Some(value)).is_ok(),
        Setter::Pathname => url.set_pathname(Some(value)).is_ok(),
        Setter::Search => {
            url.set_search(Some(value));
            true
        }
        Setter::Hash => {
            url.set_hash(Some(value));
            true
        }
    };
    if !ok && setter == Setter::Href {
        return None;
    }
    Some(record(&url))
}

/// The `application/x-www-form-urlencoded` parser: name-value pairs, `+` as space, percent
/// escapes decoded as UTF-8 with replacement (invalid escapes stay as written).
pub fn parse_urlencoded(input: &[u8]) -> Vec<(String, String)> {
    let decode = |part: &[u8]| {
        let spaced: Vec<u8> = part.iter().map(|&b| if b == b'+' { b' ' } else { b }).collect();
        let bytes: Vec<u8> = percent_encoding::percent_decode(&spaced).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    input
        .split(|&b| b == b'&')
        .filter(|sequence| !sequence.is_empty())
        .map(|sequence| match sequence.iter().position(|&b| b == b'=') {
            Some(at) => (decode(&sequence[..at]), decode(&sequence[at + 1..])),
            None => (decode(sequence), String::new()),
        })
        .collect()
}

/// Strings joined so that JS can split them apart whatever they hold: each is its length
/// in UTF-16 code units, `:`, then the string.
pub fn join_counted<'a>(strings: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for s in strings {
        out.push_str(&s.encode_utf16().count().to_string());
        out.push(':');
        out.push_str(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_set_as_the_standard_says() {
        let r = parse("HTTPS://user:pw@EXAMPLE.com:443/a/../b?x=1#f", None).unwrap();
        assert_eq!(r[0], "https://user:pw@example.com/b?x=1#f");
        assert_eq!(&r[1..], ["https://example.com", "https:", "user", "pw", "example.com", "example.com", "", "/b", "?x=1", "#f"]);
        assert_eq!(parse("/p", Some("http://h:8080/q")).unwrap()[0], "http://h:8080/p");
        assert!(parse("no scheme", None).is_none());
        assert!(can_parse("a:b", None) && !can_parse("http://[::1", None));
        assert_eq!(parse("http://münchen.de/", None).unwrap()[6], "xn--mnchen-3ya.de");
        let href = "http://h/p";
        assert_eq!(set(href, Setter::Port, "81").unwrap()[0], "http://h:81/p");
        assert_eq!(set(href, Setter::Port, "nope").unwrap()[0], "http://h/p", "a rejected value changes nothing");
        assert_eq!(set(href, Setter::Search, "a b").unwrap()[9], "?a%20b");
        assert_eq!(set(href, Setter::Hash, "").unwrap()[0], "http://h/p");
        assert!(set(href, Setter::Href, "::").is_none());
        assert_eq!(Setter::named("hostname"), Some(Setter::Hostname));
        assert_eq!(Setter::named("origin"), None);
    }

    #[test]
    fn form_data_parses_and_joins_back_apart() {
        let pairs = parse_urlencoded(b"a=1&&b=%41+c&=x&d&e=%zz&f=%e2%82");
        let want = [("a", "1"), ("b", "A c"), ("", "x"), ("d", ""), ("e", "%zz"), ("f", "\u{fffd}")];
        assert_eq!(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>(), want);
        assert_eq!(join_counted(["ab", "", "😀:"]), "2:ab0:3:😀:");
    }
}
