//! `URL` and `URLSearchParams` (the WHATWG URL standard): parsing and setters by ada
//! (https://github.com/ada-url/ada), which passes every case of WPT's `urltestdata.json`,
//! and the `application/x-www-form-urlencoded` parser.
use ada_url::Url;

/// A parsed URL as the sandbox's `URL` object keeps it: its attributes in this order.
pub type UrlRecord = [String; 11];

/// `UrlRecord`'s fields, in order.
pub const RECORD_FIELDS: [&str; 11] =
    ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"];

/// A parsed URL as the JS side keeps it: its href (ASCII: the standard serializes every URL
/// so) and where its components start and end in it (ada's `url_components`), so the
/// attributes are slices of the href made when read (as Node's URL does), not eleven strings
/// copied into the sandbox per URL. `offsets`: protocol_end, username_end, host_start,
/// host_end, port, pathname_start, search_start, hash_start (-1: absent) and the scheme's
/// type (ada's `SchemeType`: 0 http, 1 not special, 2 https, 3 ws, 4 ftp, 5 wss, 6 file).
#[derive(Debug, Clone, PartialEq)]
pub struct UrlParts {
    pub href: String,
    pub offsets: [f64; 9],
}

fn parts(url: &Url) -> UrlParts {
    let c = url.components();
    let opt = |v: Option<u32>| v.map_or(-1.0, f64::from);
    UrlParts {
        href: url.href().to_string(),
        offsets: [
            f64::from(c.protocol_end),
            f64::from(c.username_end),
            f64::from(c.host_start),
            f64::from(c.host_end),
            opt(c.port),
            opt(c.pathname_start),
            opt(c.search_start),
            opt(c.hash_start),
            f64::from(url.scheme_type() as u32),
        ],
    }
}

impl UrlParts {
    /// The attributes, read from the href and offsets as `src/web/js/04_url.js` reads them
    /// (here to test that reading against ada's own getters).
    pub fn record(&self) -> UrlRecord {
        let h = self.href.as_str();
        let o = |i: usize| self.offsets[i];
        let at = |i: usize| o(i) as usize;
        let protocol = &h[..at(0)];
        let username = if o(0) + 2.0 < o(1) { &h[at(0) + 2..at(1)] } else { "" };
        let password = if o(2) - o(1) > 0.0 { &h[at(1) + 1..at(2)] } else { "" };
        let start = if h.as_bytes().get(at(2)) == Some(&b'@') { at(2) + 1 } else { at(2) };
        let hostname = &h[start..at(3).max(start)];
        let host = if start == at(3) { "" } else { &h[start..at(5)] };
        let port = if o(4) < 0.0 { String::new() } else { format!("{}", o(4)) };
        let path_end = if o(6) >= 0.0 {
            at(6)
        } else if o(7) >= 0.0 {
            at(7)
        } else {
            h.len()
        };
        let pathname = if o(5) < 0.0 { "" } else { &h[at(5)..path_end] };
        let search_end = if o(7) >= 0.0 { at(7) } else { h.len() };
        let search = if o(6) < 0.0 || search_end - at(6) <= 1 { "" } else { &h[at(6)..search_end] };
        let hash = if o(7) < 0.0 || h.len() - at(7) <= 1 { "" } else { &h[at(7)..] };
        let origin = match o(8) as u32 {
            6 => "null".to_string(),
            1 if protocol == "blob:" && !pathname.is_empty() => match parse(pathname, None) {
                Some(inner) if inner.offsets[8] == 0.0 || inner.offsets[8] == 2.0 => {
                    let r = inner.record();
                    format!("{}//{}", r[2], r[5])
                }
                _ => "null".to_string(),
            },
            1 => "null".to_string(),
            _ => format!("{protocol}//{host}"),
        };
        [h, &origin, protocol, username, password, host, hostname, &port, pathname, search, hash].map(str::to_string)
    }
}

/// `new URL(input, base)`: the parts, or `None` when the standard's parser fails.
pub fn parse(input: &str, base: Option<&str>) -> Option<UrlParts> {
    Url::parse(input, base).ok().map(|url| parts(&url))
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
pub fn set(href: &str, setter: Setter, value: &str) -> Option<UrlParts> {
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
    Some(parts(&url))
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
        let r = parse("HTTPS://user:pw@EXAMPLE.com:443/a/../b?x=1#f", None).unwrap().record();
        assert_eq!(r[0], "https://user:pw@example.com/b?x=1#f");
        assert_eq!(&r[1..], ["https://example.com", "https:", "user", "pw", "example.com", "example.com", "", "/b", "?x=1", "#f"]);
        assert_eq!(parse("/p", Some("http://h:8080/q")).unwrap().record()[0], "http://h:8080/p");
        assert!(parse("no scheme", None).is_none());
        assert!(can_parse("a:b", None) && !can_parse("http://[::1", None));
        assert_eq!(parse("http://münchen.de/", None).unwrap().record()[6], "xn--mnchen-3ya.de");
        let href = "http://h/p";
        assert_eq!(set(href, Setter::Port, "81").unwrap().href, "http://h:81/p");
        assert_eq!(set(href, Setter::Port, "nope").unwrap().href, "http://h/p", "a rejected value changes nothing");
        assert_eq!(set(href, Setter::Search, "a b").unwrap().record()[9], "?a%20b");
        assert_eq!(set(href, Setter::Hash, "").unwrap().href, "http://h/p");
        assert!(set(href, Setter::Href, "::").is_none());
        assert_eq!(Setter::named("hostname"), Some(Setter::Hostname));
        assert_eq!(Setter::named("origin"), None);
    }

    #[test]
    fn attributes_read_from_the_href_are_adas_own() {
        let urls = [
            "https://user:pw@example.com:8443/a/b?q=1#frag",
            "http://example.com",
            "http://u@h/",
            "http://:p@h/",
            "file:///tmp/x?y",
            "a:b",
            "mailto:x@y.z?subject=hi",
            "blob:https://a.example:81/uuid",
            "blob:ftp://a/b",
            "blob:x",
            "ws://[::1]:9/?#",
            "non-spec://h:1/p?#",
            "https://h/?",
            "https://h/#",
            "sc://ñ.test/",
            "http://1.2.3.4/",
            "javascript:alert(1)",
            "http://h/%zz?%zz#%zz",
        ];
        for input in urls {
            let url = Url::parse(input, None).unwrap();
            let ada = [
                url.href(),
                &url.origin(),
                url.protocol(),
                url.username(),
                url.password(),
                url.host(),
                url.hostname(),
                url.port(),
                url.pathname(),
                url.search(),
                url.hash(),
            ]
            .map(str::to_string);
            assert_eq!(parts(&url).record(), ada, "{input}");
            assert!(url.href().is_ascii(), "{input}");
        }
    }

    #[test]
    fn form_data_parses_and_joins_back_apart() {
        let pairs = parse_urlencoded(b"a=1&&b=%41+c&=x&d&e=%zz&f=%e2%82");
        let want = [("a", "1"), ("b", "A c"), ("", "x"), ("d", ""), ("e", "%zz"), ("f", "\u{fffd}")];
        assert_eq!(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect::<Vec<_>>(), want);
        assert_eq!(join_counted(["ab", "", "😀:"]), "2:ab0:3:😀:");
    }
}
