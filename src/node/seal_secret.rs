//! The node's seal secret (behaviour §10 "Encrypted items"): what `wire::item_seal`'s keys are
//! derived from. A cluster's `server.seal_key` when the config sets one (its nodes then read
//! each other's seals); otherwise the node's own — 32 bytes from the OS RNG, made once into
//! [`SEAL_KEY_FILE`] in the journal's directory (mode 0600, hex) and read back at every start,
//! so a restart (or a copy of the journal restored) keeps every seal it handed out. Never
//! derived from anything a client knows; the secret itself is never logged, journaled or
//! shown: only the file's path is.

use std::io::Write;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::rand_core::RngCore;
use chacha20poly1305::aead::OsRng;

use crate::config::Config;
use crate::wire::item_seal::SealKey;

/// The node's own seal secret, in the journal's directory.
pub const SEAL_KEY_FILE: &str = "quotaroute-seal.key";

/// Bytes of a secret the node makes itself.
const SECRET_BYTES: usize = 32;

/// Why the node has no seal key.
#[derive(Debug, thiserror::Error)]
pub enum SealSecretError {
    #[error(
        "seal key {path}: {reason} (remove the file to make a new key; encrypted items sealed \
         with the old one are then left out of the turns that carry them)"
    )]
    Unreadable { path: PathBuf, reason: String },
    #[error("seal key {path}: cannot write it: {reason}")]
    Unwritable { path: PathBuf, reason: String },
    #[error("seal key: the OS random source failed: {0}")]
    Random(String),
}

/// The key `config`'s node seals with: from `server.seal_key` when set, else the node's own
/// secret beside the journal (made now if there is none).
pub fn seal_key(config: &Config) -> Result<SealKey, SealSecretError> {
    if let Some(shared) = &config.server.seal_key {
        return Ok(SealKey::from_secret(shared.expose().as_bytes()));
    }
    if config.cluster.is_some() {
        tracing::warn!(
            "[cluster] without server.seal_key: this node seals encrypted items with a key of \
             its own, so a turn that reaches another node loses its encrypted reasoning there; \
             give every node the same server.seal_key"
        );
    }
    let secret = own_secret(&config.journal.path)?;
    Ok(SealKey::from_secret(&secret))
}

/// The secret in `journal`'s [`SEAL_KEY_FILE`], made from the OS RNG when there is none.
fn own_secret(journal: &Path) -> Result<[u8; SECRET_BYTES], SealSecretError> {
    let path = journal.join(SEAL_KEY_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => return read_secret(&path, &text),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(SealSecretError::Unreadable {
                path,
                reason: error.to_string(),
            })
        }
    }
    let mut secret = [0u8; SECRET_BYTES];
    OsRng
        .try_fill_bytes(&mut secret)
        .map_err(|error| SealSecretError::Random(error.to_string()))?;
    match write_new(journal, &path, &secret) {
        Ok(true) => {
            tracing::info!(path = %path.display(), "made the node's seal key");
            Ok(secret)
        }
        // Another process made it first: theirs is the key.
        Ok(false) => {
            let text =
                std::fs::read_to_string(&path).map_err(|error| SealSecretError::Unreadable {
                    path: path.clone(),
                    reason: error.to_string(),
                })?;
            read_secret(&path, &text)
        }
        Err(error) => Err(SealSecretError::Unwritable {
            path,
            reason: error.to_string(),
        }),
    }
}

/// The secret `text` (64 hex digits) holds; warns when the file is open to others.
fn read_secret(path: &Path, text: &str) -> Result<[u8; SECRET_BYTES], SealSecretError> {
    let unreadable = |reason: &str| SealSecretError::Unreadable {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    let hex = text.trim();
    if hex.len() != 2 * SECRET_BYTES || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unreadable("not a key of 64 hex digits"));
    }
    let mut secret = [0u8; SECRET_BYTES];
    for (at, byte) in secret.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * at..2 * at + 2], 16)
            .map_err(|_| unreadable("not a key of 64 hex digits"))?;
    }
    if let Ok(metadata) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format!("{mode:o}"),
                "the seal key file is open to other users: chmod 600 it"
            );
        }
    }
    Ok(secret)
}

/// Writes `secret` to `path` (mode 0600) unless a file is there already: written whole under
/// another name, synced, then linked into place, so a crash or a second node starting on the
/// same directory never leaves a torn or overwritten key. `Ok(false)`: one was there first.
fn write_new(dir: &Path, path: &Path, secret: &[u8; SECRET_BYTES]) -> std::io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::create_dir_all(dir)?;
    let partial = dir.join(format!("{SEAL_KEY_FILE}.{}.partial", std::process::id()));
    let _ = std::fs::remove_file(&partial);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&partial)?;
    let mut hex = String::with_capacity(2 * SECRET_BYTES + 1);
    for byte in secret {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex.push('\n');
    let written = file
        .write_all(hex.as_bytes())
        .and_then(|()| file.sync_all());
    drop(file);
    let linked = written.and_then(|()| std::fs::hard_link(&partial, path));
    let _ = std::fs::remove_file(&partial);
    match linked {
        Ok(()) => {
            // The new name is durable once the directory is.
            if let Ok(dir) = std::fs::File::open(dir) {
                let _ = dir.sync_all();
            }
            Ok(true)
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn s10_the_own_secret_is_made_once_0600_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("journal");
        let made = own_secret(&journal).unwrap();
        let path = journal.join(SEAL_KEY_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(own_secret(&journal).unwrap(), made);
        assert_ne!(made, [0u8; SECRET_BYTES]);
        // Another directory, another secret.
        assert_ne!(own_secret(&dir.path().join("other")).unwrap(), made);
        // Nothing else is left in the directory.
        let names: Vec<_> = std::fs::read_dir(&journal)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(SEAL_KEY_FILE)]);
    }

    #[test]
    fn s10_a_damaged_secret_is_a_clear_error_that_does_not_show_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SEAL_KEY_FILE), "0123abcd-not-hex\n").unwrap();
        let error = own_secret(dir.path()).unwrap_err().to_string();
        assert!(error.contains("64 hex digits"), "{error}");
        assert!(error.contains(SEAL_KEY_FILE), "{error}");
        assert!(!error.contains("0123abcd"), "{error}");
        // The file is left as it was.
        assert_eq!(
            std::fs::read_to_string(dir.path().join(SEAL_KEY_FILE)).unwrap(),
            "0123abcd-not-hex\n"
        );
    }
}
