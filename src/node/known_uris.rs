//! A provider's upstream URIs for the generation APIs' fixed paths (`/chat/completions`,
//! `/responses`, `/messages` after its `base_url`), parsed once per load: an upstream request to
//! one of them clones its URI instead of parsing the joined URL again (a scheme, an authority
//! and a path checked byte by byte, on every request).

use http::Uri;

use crate::wire::translate::Api;

/// The parsed URIs of one provider's fixed paths.
#[derive(Debug, Clone, Default)]
pub struct KnownUris {
    by_path: Vec<(&'static str, Uri)>,
}

impl KnownUris {
    /// The URIs of `base_url` (without a trailing `/`) joined to each fixed path; a join that
    /// does not parse is left out (its requests parse it, and fail, as any other).
    pub fn new(base_url: &str) -> KnownUris {
        let by_path = Api::ALL
            .into_iter()
            .filter(|api| *api != Api::Gemini)
            .filter_map(|api| {
                let path = api.path();
                let joined = format!("{base_url}{path}");
                Some((path, Uri::try_from(joined).ok()?))
            })
            .collect();
        KnownUris { by_path }
    }

    /// The URI of `path_and_query` when it is one of the fixed paths, as parsing the joined
    /// URL gives it.
    pub fn get(&self, path_and_query: &str) -> Option<&Uri> {
        let (_, uri) = self
            .by_path
            .iter()
            .find(|(path, _)| *path == path_and_query)?;
        Some(uri)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_path_gives_what_parsing_the_joined_url_gives() {
        for base in [
            "http://127.0.0.1:4231/v1",
            "https://api.example.com/v1",
            "http://h",
        ] {
            let uris = KnownUris::new(base);
            for path in ["/chat/completions", "/responses", "/messages"] {
                let parsed = Uri::try_from(format!("{base}{path}")).unwrap();
                assert_eq!(uris.get(path), Some(&parsed), "{base}{path}");
            }
            for other in [
                "/models/m:generateContent",
                "/chat/completions?x=1",
                "/messages/",
            ] {
                assert_eq!(uris.get(other), None, "{other}");
            }
        }
        // A base that does not parse keeps nothing: its requests fail at their own parse.
        assert_eq!(KnownUris::new("http://bad host").get("/responses"), None);
    }
}
