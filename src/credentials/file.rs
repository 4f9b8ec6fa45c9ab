//! `api_key_file`: the key is the file's content, trimmed. The file is re-read every
//! [`POLL_INTERVAL`] (reading a small file once a second is cheaper than anything that could
//! miss Kubernetes' symlink swap of a mounted secret) and at once on a 401.
//!
//! Owns reading the file only; when to read it is `watch`'s.

use std::path::Path;
use std::time::Duration;

use crate::config::Secret;
use crate::credentials::error::{check_value, CredentialError};

/// How often a key file is read to notice that it changed.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Largest key file read (a key is a line; anything larger is not a key file).
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The key in `path`: its content without surrounding whitespace.
pub async fn read_key(path: &Path) -> Result<Secret, CredentialError> {
    let shown = path.display().to_string();
    let unreadable = |reason: String| CredentialError::FileUnreadable {
        path: shown.clone(),
        reason,
    };
    let metadata = tokio::fs::metadata(path)
        .await
        .map_err(|error| unreadable(error.to_string()))?;
    if metadata.len() > MAX_KEY_FILE_BYTES {
        return Err(unreadable(format!(
            "it is larger than {MAX_KEY_FILE_BYTES} bytes"
        )));
    }
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|error| unreadable(error.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| unreadable("it is not UTF-8 text".into()))?;
    let key = text.trim();
    if key.is_empty() {
        return Err(CredentialError::FileEmpty { path: shown });
    }
    check_value(key, &format!("content of {shown}"))?;
    Ok(Secret::new(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_the_trimmed_key_and_names_every_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, "  sk-from-file\n").unwrap();
        assert_eq!(read_key(&path).await.unwrap().expose(), "sk-from-file");

        std::fs::write(&path, "\n \n").unwrap();
        assert_eq!(
            read_key(&path).await.unwrap_err(),
            CredentialError::FileEmpty {
                path: path.display().to_string()
            }
        );

        std::fs::write(&path, "sk-one\nsk-two\n").unwrap();
        let error = read_key(&path).await.unwrap_err().to_string();
        assert!(error.contains("more than one line"), "{error}");
        assert!(!error.contains("sk-one"), "{error}");

        std::fs::remove_file(&path).unwrap();
        let error = read_key(&path).await.unwrap_err().to_string();
        assert!(
            error.starts_with(&format!("cannot read the key file {}", path.display())),
            "{error}"
        );
    }
}
