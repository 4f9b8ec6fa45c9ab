//! How the mock compresses like a CDN: the [`Compression`] mode and the negotiation of one
//! [`Encoding`] from a request's `Accept-Encoding` (RFC 9110 §12.5.3, q-values, `*`).
//!
//! Owns the vocabulary and the choice only; the codecs are `encoder`'s, applying them to a
//! response is `handler`'s.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The mock's compression mode (`POST /mock/compression`, [`super::MockUpstream::set_compression`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// Never compress (the default): bodies go out as the handler built them.
    #[default]
    Off,
    /// The best encoding the request accepts (highest q, then zstd > br > gzip > deflate);
    /// identity when it accepts none.
    Auto,
    /// This encoding when the request accepts it, otherwise identity.
    Gzip,
    /// The zlib format (RFC 9110's `deflate`), when accepted.
    Deflate,
    /// Brotli, when accepted.
    Br,
    /// Zstandard, when accepted.
    Zstd,
}

/// A `Content-Encoding` the mock can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    Gzip,
    /// The zlib format (RFC 1950), which is what `Content-Encoding: deflate` means.
    Deflate,
    Br,
    Zstd,
}

impl Encoding {
    /// Every encoding, best first: the tie-break of [`Compression::Auto`].
    pub const PREFERENCE: [Self; 4] = [Self::Zstd, Self::Br, Self::Gzip, Self::Deflate];

    /// The `Content-Encoding` token.
    pub fn token(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Deflate => "deflate",
            Self::Br => "br",
            Self::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Encoding {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.token())
    }
}

/// A compression mode name that is not one of `off`, `auto`, `gzip`, `deflate`, `br`, `zstd`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compression mode {0:?}: expected off, auto, gzip, deflate, br or zstd")]
pub struct UnknownCompression(pub String);

impl FromStr for Compression {
    type Err = UnknownCompression;

    /// `off`, `auto`, `gzip`, `deflate`, `br` or `zstd` (case-insensitive; `none` and
    /// `identity` also mean `off`).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "off" | "none" | "identity" => Ok(Self::Off),
            "auto" => Ok(Self::Auto),
            "gzip" => Ok(Self::Gzip),
            "deflate" => Ok(Self::Deflate),
            "br" => Ok(Self::Br),
            "zstd" => Ok(Self::Zstd),
            _ => Err(UnknownCompression(text.to_owned())),
        }
    }
}

impl Compression {
    /// The encoding a request with this `Accept-Encoding` gets; `None` = identity. An absent
    /// header gets identity too (CDNs only compress for clients that ask).
    pub fn negotiate(self, accept_encoding: Option<&str>) -> Option<Encoding> {
        let accept = AcceptEncoding::parse(accept_encoding?);
        match self {
            Self::Off => None,
            Self::Auto => Encoding::PREFERENCE
                .into_iter()
                .map(|encoding| (encoding, accept.quality(encoding.token())))
                .filter(|(_, quality)| *quality > 0)
                // Highest q wins; `max_by_key` keeps the last maximum, so walk worst first.
                .rev()
                .max_by_key(|(_, quality)| *quality)
                .map(|(encoding, _)| encoding),
            Self::Gzip | Self::Deflate | Self::Br | Self::Zstd => {
                let wanted = match self {
                    Self::Deflate => Encoding::Deflate,
                    Self::Br => Encoding::Br,
                    Self::Zstd => Encoding::Zstd,
                    _ => Encoding::Gzip,
                };
                (accept.quality(wanted.token()) > 0).then_some(wanted)
            }
        }
    }
}

/// A parsed `Accept-Encoding`: codings with their q-values in thousandths (`q=0.5` → 500).
struct AcceptEncoding {
    codings: Vec<(String, u16)>,
}

impl AcceptEncoding {
    fn parse(header: &str) -> Self {
        let codings = header
            .split(',')
            .filter_map(|element| {
                let mut parts = element.split(';');
                let coding = parts.next()?.trim().to_ascii_lowercase();
                if coding.is_empty() {
                    return None;
                }
                let mut quality = 1000;
                for parameter in parts {
                    let (name, value) = parameter.split_once('=')?;
                    if name.trim().eq_ignore_ascii_case("q") {
                        // A q-value that does not parse makes the element invalid: skip it.
                        quality = parse_quality(value.trim())?;
                    }
                }
                Some((coding, quality))
            })
            .collect();
        Self { codings }
    }

    /// The q-value the header gives `coding`: its own entry, else `*`'s, else 0. `x-gzip` is
    /// gzip's old alias.
    fn quality(&self, coding: &str) -> u16 {
        let named = |wanted: &str| {
            self.codings
                .iter()
                .find(|(name, _)| name == wanted)
                .map(|(_, quality)| *quality)
        };
        named(coding)
            .or_else(|| (coding == "gzip").then(|| named("x-gzip")).flatten())
            .or_else(|| named("*"))
            .unwrap_or(0)
    }
}

/// RFC 9110 `qvalue`: `0`, `0.5`, `1`, `1.000`…, at most three decimals, never above 1.
fn parse_quality(text: &str) -> Option<u16> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let thousandths = format!("{fraction:0<3}").parse::<u16>().ok()?;
    match whole {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auto(header: &str) -> Option<Encoding> {
        Compression::Auto.negotiate(Some(header))
    }

    #[test]
    fn modes_parse_from_their_names() {
        assert_eq!("gzip".parse(), Ok(Compression::Gzip));
        assert_eq!("BR".parse(), Ok(Compression::Br));
        assert_eq!("off".parse(), Ok(Compression::Off));
        assert_eq!("auto".parse(), Ok(Compression::Auto));
        assert!("lz4".parse::<Compression>().is_err());
        let json: Compression = serde_json::from_str(r#""zstd""#).unwrap();
        assert_eq!(json, Compression::Zstd);
    }

    #[test]
    fn auto_prefers_zstd_then_br_then_gzip_then_deflate() {
        assert_eq!(auto("gzip, deflate, br, zstd"), Some(Encoding::Zstd));
        assert_eq!(auto("gzip, deflate, br"), Some(Encoding::Br));
        assert_eq!(auto("deflate, gzip"), Some(Encoding::Gzip));
        assert_eq!(auto("deflate"), Some(Encoding::Deflate));
        assert_eq!(auto("*"), Some(Encoding::Zstd));
    }

    #[test]
    fn q_values_rank_before_preference_and_zero_refuses() {
        assert_eq!(auto("gzip;q=0, br"), Some(Encoding::Br));
        assert_eq!(auto("gzip;q=1.0, br;q=0.5"), Some(Encoding::Gzip));
        assert_eq!(auto("br;q=0.001, gzip;q=0.002"), Some(Encoding::Gzip));
        assert_eq!(auto("*;q=0, gzip"), Some(Encoding::Gzip));
        assert_eq!(auto("*, zstd;q=0, br;q=0"), Some(Encoding::Gzip));
        assert_eq!(auto("identity"), None);
        assert_eq!(auto(""), None);
        assert_eq!(auto("gzip;q=0"), None);
        assert_eq!(auto("x-gzip"), Some(Encoding::Gzip));
        // Malformed q-values make their element invalid, not the header.
        assert_eq!(auto("br;q=2, gzip"), Some(Encoding::Gzip));
        assert_eq!(auto("br;q=0.5555"), None);
        assert_eq!(Compression::Auto.negotiate(None), None);
    }

    #[test]
    fn named_modes_need_the_request_to_accept_them() {
        assert_eq!(
            Compression::Gzip.negotiate(Some("gzip, br")),
            Some(Encoding::Gzip)
        );
        assert_eq!(Compression::Gzip.negotiate(Some("br")), None);
        assert_eq!(
            Compression::Deflate.negotiate(Some("*")),
            Some(Encoding::Deflate)
        );
        assert_eq!(Compression::Zstd.negotiate(Some("zstd;q=0")), None);
        assert_eq!(Compression::Off.negotiate(Some("gzip")), None);
        assert_eq!(Compression::Br.negotiate(None), None);
    }
}
